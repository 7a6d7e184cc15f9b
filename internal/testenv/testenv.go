// Package testenv finds the servers that tests need (Redis, PostgreSQL),
// started by scripts/test and named in environment variables.
//
// A test that needs a server which is not there skips, except under CI=true,
// where it fails: CI must never pass by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Variables read by this package. scripts/test sets them.
const (
	RedisAddrVar   = "TEST_REDIS_ADDR"
	PostgresDSNVar = "TEST_POSTGRES_DSN"
)

// InCI reports whether skips must become failures.
func InCI() bool { return os.Getenv("CI") == "true" }

// need returns the value of the environment variable, or skips the test (fails it in CI).
func need(t testing.TB, v, what string) string {
	t.Helper()
	s := os.Getenv(v)
	if s != "" {
		return s
	}
	Missing(t, what, fmt.Sprintf("set %s or run the tests with scripts/test", v))
	return ""
}

// RedisAddr returns the address of a real redis-server.
func RedisAddr(t testing.TB) string {
	t.Helper()
	return need(t, RedisAddrVar, "redis-server")
}

// PostgresDSN returns a DSN for a PostgreSQL server with rights to create databases.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return need(t, PostgresDSNVar, "PostgreSQL")
}

// PostgresDatabase creates a new, empty database for this test, drops it when
// the test ends, and returns its DSN.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	admin := PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("connect to PostgreSQL to drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", PostgresDSNVar, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Missing skips the test for want of what (fails it under CI=true); how
// says how to get it.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required under CI=true: %s", what, how)
	}
	t.Skipf("no %s: %s", what, how)
}

// Command returns the path of the program name on PATH, or calls Missing.
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, "run the tests with scripts/test, which installs it")
	}
	return p
}
