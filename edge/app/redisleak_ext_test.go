package app_test

import (
	"context"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/app"
	"github.com/orgedge/edge/internal/testkit"
)

// An embedder whose app.New fails keeps running: the Redis pool New made
// must not stay open behind the error. With redis.min_idle_conns the pool
// dials at once, so a pool left open holds those connections until the
// garbage collector happens to find the sockets unreachable; the test
// keeps it from running, so that what it sees is New's own closing.
func TestANewThatFailsLeavesNoConnectionToRedisOpen(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	srv := testkit.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	before := serverStat(t, rdb, "total_connections_received")

	cfg := testkit.EdgeConfig(t, "http://127.0.0.1:1", testkit.SharedIssuer(t).URL())
	if err := cfg.Validate(); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	cfg.Redis.Addr = srv.Addr
	cfg.Redis.MinIdleConns = 3
	// Past validation, as a configuration built in code can be: New's
	// own parsing is what fails, after it made the Redis client.
	cfg.Listen.ConnectionBoundExempt = []string{"not an address"}
	if a, err := app.New(cfg, quiet(), "test"); err == nil {
		a.Close()
		t.Fatal("New accepted listen.connection_bound_exempt: not an address")
	}

	// The pool dials in the background: wait until its connections were
	// opened and closed again. A pool closed before it dialed opens none.
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := serverStat(t, rdb, "connected_clients") - 1 // not the test's own
		dialed := serverStat(t, rdb, "total_connections_received") - before
		if open == 0 && dialed >= int64(cfg.Redis.MinIdleConns) {
			return
		}
		if time.Now().After(deadline) {
			if open != 0 {
				t.Fatalf("%d connections to Redis left open by a New that failed (%d opened)", open, dialed)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverStat reads one number of INFO (clients and stats sections).
func serverStat(t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "clients", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %v", name, err)
			}
			return n
		}
	}
	t.Fatalf("INFO has no %s", name)
	return 0
}
