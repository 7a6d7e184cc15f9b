package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrations holds the schema, one file per version: NNNN_what.sql, applied
// in order of NNNN and never edited once released (add a new file instead).
// Each file is portable SQL run as it is on both databases.
//
//go:embed migrations/*.sql
var migrations embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration, error) {
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := make(map[int]string)
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".sql")
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number", f)
		}
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, name, v)
		}
		seen[v] = name
		b, err := migrations.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the migrations that the database has not recorded in
// schema_migrations, all in one transaction: either the schema is brought
// up to date or it is left as it was. On PostgreSQL an advisory lock makes
// a second process opening the database at once wait, then find nothing to
// do; on SQLite the IMMEDIATE transaction does the same.
func (s *sqlStore) migrate(ctx context.Context, now int64) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(r runner) error {
		if s.d.lockMigrations != "" {
			if _, err := r.exec(ctx, s.d.lockMigrations); err != nil {
				return fmt.Errorf("lock for migrations: %w", err)
			}
		}
		if _, err := r.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at BIGINT  NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		versions, err := queryAll(ctx, r, func(row scanner) (int, error) {
			var v int
			err := row.Scan(&v)
			return v, err
		}, "SELECT version FROM schema_migrations")
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied := make(map[int]bool)
		for _, v := range versions {
			applied[v] = true
		}
		for _, m := range ms {
			if applied[m.version] {
				continue
			}
			// No arguments: both drivers then run the file's statements
			// as one multi-statement string.
			if _, err := r.exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := r.exec(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.version, m.name, now); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
