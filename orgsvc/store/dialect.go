package store

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between SQLite and PostgreSQL. Queries are written
// once, with ? placeholders, in the SQL both understand (including
// INSERT … ON CONFLICT and RETURNING); the dialect adapts the rest.
type dialect struct {
	name string
	// dollarPlaceholders rewrites ? to $1, $2, … (PostgreSQL).
	dollarPlaceholders bool
	// lockRow is appended to a SELECT of a row that the transaction is about
	// to change, so that concurrent writers of it queue up. PostgreSQL needs it
	// under READ COMMITTED; NO KEY UPDATE still lets other transactions insert
	// rows referencing the locked one. SQLite needs nothing: its write
	// transactions begin IMMEDIATE and so run one at a time.
	lockRow string
	// lockMigrations is run first in the migration transaction, so that two
	// processes opening one database at once apply each migration once.
	lockMigrations string
	// uniqueViolation reports whether err is a violation of key.
	uniqueViolation func(err error, key uniqueKey) bool
	// retryable reports whether a transaction that failed with err may simply
	// be run again (deadlock victim, serialization failure).
	retryable func(err error) bool
}

// uniqueKey names a unique constraint of the schema the way each database
// reports its violation.
type uniqueKey struct {
	name    string // constraint name, as PostgreSQL reports it
	columns string // "table.column, …", as SQLite reports it
}

// The unique constraints that callers see as errors. Their names are fixed in
// migrations/0001_init.sql.
var (
	organizationNameKey = uniqueKey{"organizations_name_key", "organizations.name"}
	projectNameKey      = uniqueKey{"projects_organization_id_name_key", "projects.organization_id, projects.name"}
	environmentNameKey  = uniqueKey{"environments_project_id_name_key", "environments.project_id, environments.name"}
)

var sqliteDialect = &dialect{
	name: "sqlite",
	uniqueViolation: func(err error, key uniqueKey) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) || e.Code() != sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			return false
		}
		// The message ends "UNIQUE constraint failed: t.a, t.b (2067)".
		return strings.Contains(e.Error(), "UNIQUE constraint failed: "+key.columns+" (")
	},
	retryable: func(error) bool { return false },
}

var postgresDialect = &dialect{
	name:               "postgres",
	dollarPlaceholders: true,
	lockRow:            " FOR NO KEY UPDATE",
	// Any constant shared by every process of this program will do.
	lockMigrations: "SELECT pg_advisory_xact_lock(7217411830418022961)",
	uniqueViolation: func(err error, key uniqueKey) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505" && e.ConstraintName == key.name
	},
	retryable: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01")
	},
}

// rebind rewrites the ? placeholders of query for the dialect. Question marks
// inside quoted strings and identifiers are left alone.
func (d *dialect) rebind(query string) string {
	if !d.dollarPlaceholders || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	var quote byte // the quote we are inside, or 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
