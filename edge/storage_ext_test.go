package edge_test

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestEveryKeyTheEdgeWritesExpires: after a mixed workload through a real
// edge on a Redis of its own (plan rates and a refusal, daily caps, keyed
// calls kept and too large to keep, an operation rate, environment quotas, an
// open WatchEnvironment stream), every key in Redis has an expiry, while the
// stream is open and after it closed: a million subjects who call once leave
// nothing behind for good (docs/operations.md, Redis memory).
func TestEveryKeyTheEdgeWritesExpires(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr
	cfg.Upstream.AdminURL = be.AdminURL
	free := cfg.Limits.Plans["free"]
	free.Burst = 8
	cfg.Limits.Plans["free"] = free
	cfg.Idempotency.MaxResponseBytes = 1 << 10
	e := testkit.StartEdge(t, cfg)
	ctx := ctxT(t)

	// A free subject: keyed calls, an environment and its quotas, a stream,
	// then its burst spent to a refusal.
	c := testkit.NewClients(e.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "free-keys"))
	kept := req(&svcv1.CreateOrganizationRequest{Name: "kept", BillingEmail: "a@b.example"})
	kept.Header().Set("Idempotency-Key", "kept")
	if _, err := c.Org.CreateOrganization(ctx, kept); err != nil {
		t.Fatal(err)
	}
	org, prj := project(t, c, "keys")
	long := req(&svcv1.CreateProjectRequest{OrganizationId: org, Name: "long", Description: strings.Repeat("x", 1500)})
	long.Header().Set("Idempotency-Key", "too-large")
	if _, err := c.Org.CreateProject(ctx, long); err != nil {
		t.Fatal(err)
	}
	id, err := createEnv(ctx, c, prj, "a")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
	if err != nil || !stream.Receive() {
		t.Fatalf("watch: %v %v", err, stream.Err())
	}
	// A pro subject: a daily count of its own.
	pro := testkit.NewClients(e.URL, testkit.GRPC, testkit.Token(t, iss.URL(), "pro-keys"))
	if _, err := pro.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 0; i < 20 && !refused; i++ {
		_, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
		var ce *connect.Error
		refused = errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted
	}
	if !refused {
		t.Fatal("the free subject's burst of 8 was never refused")
	}

	rdb := redisClient(t, rs.Addr)
	lasting := func(when string, kinds ...string) {
		t.Helper()
		var all []string
		it := rdb.Scan(ctx, 0, "*", 100).Iterator()
		for it.Next(ctx) {
			all = append(all, it.Val())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		for _, want := range kinds {
			if !strings.Contains(strings.Join(all, " "), want) {
				t.Fatalf("%s: no key with %q among %v: the workload did not reach every kind", when, want, all)
			}
		}
		for _, k := range all {
			ttl, err := rdb.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < 0 && rdb.Exists(ctx, k).Val() == 1 {
				t.Errorf("%s: %s has no expiry (TTL %v)", when, k, ttl)
			}
		}
		t.Logf("%s: %d keys", when, len(all))
	}
	kinds := []string{"idem:", ":ledger", "rl:", "}:s", "q:", ":envs:"}
	lasting("stream open", append(kinds, ":streams")...)
	_ = stream.Close()
	lasting("stream closed", kinds...)
}
