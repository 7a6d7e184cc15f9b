package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// sqlStore implements Store over database/sql for either dialect.
//
// Locking, for PostgreSQL's READ COMMITTED (SQLite runs one write
// transaction at a time and needs none of this): a transaction that changes
// an organization's members, invitations or projects first locks the
// organization's row, and one that changes a project's environments first
// locks the project's row, always in the order organization, project,
// environment. Checks made after taking the lock therefore see every change
// committed before it, and no two transactions can wait for each other in a
// cycle (deadlock).
type sqlStore struct {
	db *sql.DB
	d  *dialect
}

var _ Store = (*sqlStore)(nil)

func (s *sqlStore) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *sqlStore) Close() error { return s.db.Close() }

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runner runs queries written with ? placeholders in the store's dialect.
type runner struct {
	q querier
	d *dialect
}

func (r runner) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.q.ExecContext(ctx, r.d.rebind(query), args...)
}

func (r runner) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.q.QueryContext(ctx, r.d.rebind(query), args...)
}

func (r runner) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return r.q.QueryRowContext(ctx, r.d.rebind(query), args...)
}

// execOne runs a statement and reports whether it changed any row.
func (r runner) execOne(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := r.exec(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// read runs queries outside a transaction.
func (s *sqlStore) read() runner { return runner{q: s.db, d: s.d} }

// maxTxAttempts bounds the retries of a transaction that the database
// aborted to break a deadlock or a serialization conflict.
const maxTxAttempts = 3

// inTx runs fn in a transaction, committed if fn returns nil. fn may run
// more than once, so it must not keep state across runs.
func (s *sqlStore) inTx(ctx context.Context, fn func(r runner) error) error {
	var err error
	for range maxTxAttempts {
		if err = s.tryTx(ctx, fn); err == nil || !s.d.retryable(err) {
			return err
		}
	}
	return err
}

func (s *sqlStore) tryTx(ctx context.Context, fn func(r runner) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(runner{q: tx, d: s.d}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// newID returns prefix followed by a UUIDv7, which sorts by creation time.
func newID(prefix string) (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return prefix + u.String(), nil
}

// orNewID returns id, or a new one if it is empty.
func orNewID(id, prefix string) (string, error) {
	if id != "" {
		return id, nil
	}
	return newID(prefix)
}

// Times are stored as Unix microseconds, 0 for the zero time.

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// A page token is the base64url form of the last key of the previous page.
// It is opaque to callers and means nothing beyond the list it came from.

func encodeToken(lastKey string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastKey))
}

// decodeToken returns the key after which the page starts: "" for the first.
func decodeToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", ErrInvalidPageToken
	}
	return string(b), nil
}

// defaultPageSize stands in for a Page.Size that the caller left unset.
const defaultPageSize = 100

func pageSize(p Page) int {
	if p.Size <= 0 {
		return defaultPageSize
	}
	return p.Size
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// queryAll runs query and scans every row with scan.
func queryAll[T any](ctx context.Context, r runner, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// paginate trims items, fetched with LIMIT size+1, to one page and returns
// the next page's token, empty when this page is the last.
func paginate[T any](items []T, size int, key func(T) string) ([]T, string) {
	if len(items) <= size {
		return items, ""
	}
	items = items[:size]
	return items, encodeToken(key(items[len(items)-1]))
}

// exists reports whether query returns a row.
func exists(ctx context.Context, r runner, query string, args ...any) (bool, error) {
	var one int
	err := r.queryRow(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// orgMissing returns ErrOrganizationNotFound if organization orgID does not
// exist, else orElse. It tells which of the two a lookup that found nothing
// in an organization ran into.
func orgMissing(ctx context.Context, r runner, orgID string, orElse error) error {
	ok, err := exists(ctx, r, "SELECT 1 FROM organizations WHERE id = ?", orgID)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrOrganizationNotFound
	default:
		return orElse
	}
}

// opError wraps a database error with the operation, leaving the package's
// own errors as they are so that callers see exactly the sentinel.
func opError(op string, err error) error {
	if err == nil || isSentinel(err) {
		return err
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

var sentinels = []error{
	ErrOrganizationNotFound, ErrOrganizationNameTaken, ErrOrganizationHasProjects,
	ErrProjectNotFound, ErrProjectNameTaken, ErrProjectHasEnvironments,
	ErrMemberNotFound, ErrAlreadyMember, ErrLastAdmin,
	ErrEnvironmentNotFound, ErrEnvironmentNameTaken, ErrInvalidPageToken,
}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if err == s {
			return true
		}
	}
	return false
}
