package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// Option changes how a Store is opened.
type Option func(*options)

type options struct {
	maxConns int
}

// WithMaxConns bounds the store's connection pool to n open connections
// (default: 8 for SQLite, 16 for PostgreSQL). Callers beyond it wait.
func WithMaxConns(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxConns = n
		}
	}
}

// Open opens the store that dsn names: a postgres:// or postgresql:// URL
// opens PostgreSQL (OpenPostgres); "sqlite:PATH" or a bare file path opens
// SQLite (OpenSQLite). Any other scheme is an error.
func Open(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn, opts...)
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		// sqlite:///abs/path and sqlite://rel/path, as well as sqlite:path.
		path = strings.TrimPrefix(path, "//")
		return OpenSQLite(ctx, path, opts...)
	case strings.Contains(dsn, "://"):
		scheme, _, _ := strings.Cut(dsn, "://")
		return nil, fmt.Errorf("store: unsupported database %q (want postgres://, postgresql://, sqlite: or a file path)", scheme)
	default:
		return OpenSQLite(ctx, dsn, opts...)
	}
}

// OpenSQLite opens (creating it if needed) the SQLite database in the file at
// path and brings its schema up to date. The database is in WAL mode with
// foreign keys on; writers take the write lock when they begin and wait up to
// 10 seconds for it, so concurrent writers queue instead of failing.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (Store, error) {
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") {
		// A pool of connections to :memory: would be several databases.
		return nil, fmt.Errorf("store: SQLite needs a file path without ? or #, got %q", path)
	}
	dsn := "file:" + path +
		"?_pragma=busy_timeout(10000)" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)" + // durable in WAL mode except on power loss
		"&_txlock=immediate"
	return open(ctx, "sqlite", dsn, sqliteDialect, 8, opts)
}

// OpenPostgres connects to the PostgreSQL database that dsn names (a URL or
// key=value string as pgx accepts) and brings its schema up to date. Several
// processes may open the same database at once.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	return open(ctx, "pgx", dsn, postgresDialect, 16, opts)
}

func open(ctx context.Context, driver, dsn string, d *dialect, maxConns int, opts []Option) (Store, error) {
	o := options{maxConns: maxConns}
	for _, opt := range opts {
		opt(&o)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", d.name, err)
	}
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour)
	s := &sqlStore{db: db, d: d}
	if err := ping(ctx, db, d); err != nil {
		return nil, errors.Join(fmt.Errorf("store: connect to %s: %w", d.name, err), db.Close())
	}
	if err := s.migrate(ctx, time.Now().UnixMicro()); err != nil {
		return nil, errors.Join(fmt.Errorf("store: migrate %s: %w", d.name, err), db.Close())
	}
	return s, nil
}

// busyWait bounds how long opening waits for a SQLite database that other
// processes are opening at the same moment.
const busyWait = 10 * time.Second

// ping makes the first connection. A new SQLite connection switches the
// file to WAL mode, and while another process's connection does the same
// SQLite answers SQLITE_BUSY at once, without waiting its busy timeout:
// that first connection is tried again, for up to busyWait. Any other error
// is returned at once.
func ping(ctx context.Context, db *sql.DB, d *dialect) error {
	deadline := time.Now().Add(busyWait)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || d != sqliteDialect || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}
