package edge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// outageTimeout is the Redis deadline of the outage tests' edges: short
// enough that a stalled Redis costs little, long enough for a loaded
// machine's healthy Redis before the outage.
const outageTimeout = 300 * time.Millisecond

// TestEveryRedisUserKeepsItsPolicyPromiseWhenRedisIsDownOrStalled checks
// what docs/limits.md ("When Redis fails") promises for each user of Redis
// (rate limits, stream leases, environment quotas on create and delete,
// idempotency) under each policy, with Redis refusing connections and with
// Redis accepting them and never answering:
//
//   - limits fail_open: every call is admitted (rates held to the local
//     share, leases and quota releases skipped); the stream opens; the
//     environment is deleted; but a free subject's CreateEnvironment gets
//     unavailable: a bounded quota that cannot be checked is not granted.
//   - limits fail_closed: every call gets unavailable, LIMITS_UNAVAILABLE,
//     and nothing reaches the backend.
//   - idempotency fail_open: a keyed call runs without the key's promise
//     (a retry runs again); fail_closed: a keyed call gets unavailable,
//     IDEMPOTENCY_UNAVAILABLE, and does not reach the backend, while calls
//     without a key go on.
//
// No call waits on Redis for longer than the test's deadline, and once
// Redis is back, exact limits resume.
func TestEveryRedisUserKeepsItsPolicyPromiseWhenRedisIsDownOrStalled(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"refused", "stalled"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			outageOfEveryRedisUser(t, fault)
		})
	}
}

func outageOfEveryRedisUser(t *testing.T, fault string) {
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{ProvisionDelay: time.Hour})
	redis := testkit.StartFaultProxy(t, testenv.RedisAddr(t))
	edgeWith := func(limits, idem config.FailureMode) *testkit.Edge {
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		cfg.Redis.Addr = redis.Addr
		cfg.Redis.Timeout = outageTimeout
		cfg.Limits.OnRedisFailure = limits
		cfg.Idempotency.OnRedisFailure = idem
		return testkit.StartEdge(t, cfg)
	}
	open := edgeWith(config.FailOpen, config.FailOpen)
	closed := edgeWith(config.FailClosed, config.FailClosed)
	keyClosed := edgeWith(config.FailOpen, config.FailClosed)

	ctx := ctxT(t)
	tok := testkit.Token(t, iss.URL(), "free-outage")
	setup := testkit.NewClients(open.URL, testkit.ConnectProto, tok)
	org, err := setup.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "outage", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := setup.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := setup.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e1", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	projects := func() int {
		t.Helper()
		res, err := setup.Org.ListProjects(ctx, req(&svcv1.ListProjectsRequest{OrganizationId: org.Msg.Id}))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Msg.Projects)
	}

	switch fault {
	case "refused":
		redis.Refuse()
	case "stalled":
		redis.Stall()
	}
	// Every call below must be answered well within this: a stalled Redis
	// costs each call at most a few of the Redis deadlines.
	callCtx := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return c
	}

	t.Run("fail_closed", func(t *testing.T) {
		c := testkit.NewClients(closed.URL, testkit.GRPC, tok)
		before := projects()
		_, err := c.Org.ListOrganizations(callCtx(), req(&svcv1.ListOrganizationsRequest{}))
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		stream, err := c.Env.WatchEnvironment(callCtx(), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
		if err == nil {
			for stream.Receive() {
				t.Fatal("a stream opened without its lease under fail_closed")
			}
			err = stream.Err()
			stream.Close()
		}
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		_, err = c.Env.CreateEnvironment(callCtx(), req(&svcv1.CreateEnvironmentRequest{Name: "closed", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		_, err = c.Env.DeleteEnvironment(callCtx(), req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		keyed := req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "closed"})
		keyed.Header().Set("Idempotency-Key", testenv.Unique("k"))
		_, err = c.Org.CreateProject(callCtx(), keyed)
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		if got := projects(); got != before {
			t.Errorf("fail_closed let a call reach the backend: %d projects, %d before", got, before)
		}
	})

	t.Run("idempotency_fail_closed", func(t *testing.T) {
		c := testkit.NewClients(keyClosed.URL, testkit.ConnectJSON, tok)
		before := projects()
		keyed := req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "keyed"})
		keyed.Header().Set("Idempotency-Key", testenv.Unique("k"))
		_, err := c.Org.CreateProject(callCtx(), keyed)
		wantError(t, err, connect.CodeUnavailable, "IDEMPOTENCY_UNAVAILABLE", "edge")
		if got := projects(); got != before {
			t.Errorf("a keyed call reached the backend without its key's promise: %d projects, %d before", got, before)
		}
		if _, err := c.Org.CreateProject(callCtx(), req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "unkeyed"})); err != nil {
			t.Errorf("a call without a key under limits fail_open: %v", err)
		}
	})

	t.Run("fail_open", func(t *testing.T) {
		c := testkit.NewClients(open.URL, testkit.GRPC, tok)
		if _, err := c.Org.ListOrganizations(callCtx(), req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatalf("rate limits fail_open: %v", err)
		}
		stream, err := c.Env.WatchEnvironment(callCtx(), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
		if err != nil || !stream.Receive() {
			t.Fatalf("stream without its lease under fail_open: %v %v", err, stream.Err())
		}
		stream.Close()
		// A quota that cannot be checked is not granted, even under
		// fail_open: the environment would never have been counted.
		_, err = c.Env.CreateEnvironment(callCtx(), req(&svcv1.CreateEnvironmentRequest{Name: "open", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
		if _, err := c.Env.DeleteEnvironment(callCtx(), req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id})); err != nil {
			t.Fatalf("DeleteEnvironment without its release under fail_open: %v", err)
		}
		before := projects()
		key := testenv.Unique("k")
		for i := range 2 {
			keyed := req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "open"})
			keyed.Header().Set("Idempotency-Key", key)
			res, err := c.Org.CreateProject(callCtx(), keyed)
			switch {
			case i == 0 && err != nil:
				t.Fatalf("keyed call under idempotency fail_open: %v", err)
			case i == 0 && res.Header().Get("Idempotent-Replayed") != "":
				t.Fatalf("a replay without Redis")
			case i == 1 && connect.CodeOf(err) != connect.CodeAlreadyExists:
				// The retry ran again at the backend, which refused the
				// name it had just taken: no replay without Redis.
				t.Fatalf("keyed retry under idempotency fail_open: %v, want already_exists from the backend", err)
			}
		}
		if got := projects(); got != before+1 {
			t.Errorf("%d projects, want %d", got, before+1)
		}
		m := testkit.Scrape(t, open.AdminURL+"/metrics")
		if m.Sum("edge_fail_open_active") != 1 {
			t.Errorf("edge_fail_open_active %v during the outage, want 1", m.Sum("edge_fail_open_active"))
		}
	})

	redis.Heal()
	// Exact limits resume: a free subject's third concurrent environment
	// is refused again (e1 and one more run), once the breaker has let a
	// probe through.
	c := testkit.NewClients(open.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "free-after-outage"))
	deadline := time.Now().Add(30 * time.Second)
	for testkit.Scrape(t, open.AdminURL+"/metrics").Sum("edge_fail_open_active") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("fail-open did not end after Redis came back")
		}
		_, _ = c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
		time.Sleep(100 * time.Millisecond)
	}
	o2, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "after", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: o2.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: fmt.Sprintf("a%d", i), BlueprintId: "go-api", ProjectId: p2.Msg.Id})); err != nil {
			t.Fatalf("environment %d after the outage: %v", i+1, err)
		}
	}
	_, err = c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "a2", BlueprintId: "go-api", ProjectId: p2.Msg.Id}))
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
}
