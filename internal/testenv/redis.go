package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterAddrsVar names the seed nodes (comma-separated) of a Redis
// Cluster with three masters that scripts/test starts.
const RedisClusterAddrsVar = "TEST_REDIS_CLUSTER_ADDRS"

// Redis returns a client of the real redis-server (closed when the test
// ends). Tests share the server: use keys of their own (see Unique).
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	addr := RedisAddr(t)
	return connect(t, &redis.UniversalOptions{Addrs: []string{addr}})
}

// RedisCluster returns a cluster client of the real Redis Cluster.
func RedisCluster(t testing.TB) redis.UniversalClient {
	t.Helper()
	addrs := strings.Split(need(t, RedisClusterAddrsVar, "a Redis Cluster"), ",")
	return connect(t, &redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
}

// RedisTargets returns, by name, every Redis a suite about Redis must pass
// against: "redis" (one server) and "cluster" (three masters).
func RedisTargets() map[string]func(testing.TB) redis.UniversalClient {
	return map[string]func(testing.TB) redis.UniversalClient{"redis": Redis, "cluster": RedisCluster}
}

func connect(t testing.TB, opts *redis.UniversalOptions) redis.UniversalClient {
	t.Helper()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	c := redis.NewUniversalClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis %v: %v", opts.Addrs, err)
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		// Every master must answer, or keys on its slots would fail later.
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }); err != nil {
			t.Fatalf("redis cluster master: %v", err)
		}
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Unique returns a random name for a test's subjects and keys, so that tests
// sharing one Redis never see each other's state.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// RoundTrips is a go-redis hook that counts the round trips of the client
// it is added to (AddHook): one per command sent alone, one per pipeline,
// whatever a script runs inside Redis. Unlike the server's INFO
// commandstats, it sees this client's calls only, so tests sharing a
// server do not disturb it. Safe for concurrent use.
type RoundTrips struct {
	n, scripts atomic.Int64
}

// Count returns the round trips so far.
func (r *RoundTrips) Count() int64 { return r.n.Load() }

// Scripts returns the EVAL and EVALSHA commands sent so far (in pipelines
// too).
func (r *RoundTrips) Scripts() int64 { return r.scripts.Load() }

func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		r.script(cmd)
		return next(ctx, cmd)
	}
}

func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		for _, c := range cmds {
			r.script(c)
		}
		return next(ctx, cmds)
	}
}

func (r *RoundTrips) script(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" || n == "evalsha_ro" || n == "eval_ro" {
		r.scripts.Add(1)
	}
}

var _ redis.Hook = (*RoundTrips)(nil)
