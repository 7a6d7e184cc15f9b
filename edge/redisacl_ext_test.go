package edge_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// narrowACL is the Redis ACL that docs/operations.md ("Redis",
// Authentication) gives the edge's user, for the default key prefix
// "edge:". Keep the two the same.
const narrowACL = "~edge:* +@read +@write +@scripting +@connection +@transaction +time"

// TestEdgeEnforcesEveryLimitFromRedisAsTheNarrowACLUser runs an edge as a
// Redis user that has only the documented ACL (the default user is off)
// and uses every part of the edge that keeps state in Redis: plan rates
// with exact counts, an Idempotency-Key replay, a stream lease, the
// environment quota with its reservation, confirmation and release, and
// GetUsage. Nothing is decided without Redis (no fail-open, no Redis
// error) and Redis denied nothing (ACL LOG is empty).
func TestEdgeEnforcesEveryLimitFromRedisAsTheNarrowACLUser(t *testing.T) {
	t.Parallel()
	// The test's own user reads ACL LOG.
	args := []string{"--user", "default", "off", "--user", "admin", "on", ">admin-password", "~*", "&*", "+@all",
		"--user", "edge", "on", ">edge-password"}
	args = append(args, strings.Fields(narrowACL)...)
	rs := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
		Args: func(port int, dir string) []string {
			return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, args...)
		},
		Ping: func(ctx context.Context, addr string) error {
			c := redis.NewClient(&redis.Options{Addr: addr, Username: "edge", Password: "edge-password", MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		},
	})
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr
	cfg.Redis.KeyPrefix = "edge:"
	cfg.Redis.Username, cfg.Redis.Password = "edge", "edge-password"
	// The plan refills once a minute: the counts below are Redis' exact
	// ones however slowly a busy machine makes the calls (at the default
	// rate a call more than 0.6 s after the last found one back).
	free := cfg.Limits.Plans["free"]
	free.RequestsPerMinute = 1
	cfg.Limits.Plans["free"] = free
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), testenv.Unique("free-acl"))
	ctx := ctxT(t)

	start := time.Now()
	for i := range 3 {
		res, body := jsonCall(t, e.URL, tok, listOrgs, "{}")
		wantFreePlanCount(t, res, body, i, start)
	}

	c := testkit.NewClients(e.URL, testkit.ConnectProto, tok)
	_, prj := project(t, c, "acl")
	keyed := func() *connect.Response[svcv1.Project] {
		r := req(&svcv1.CreateProjectRequest{OrganizationId: "", Name: "keyed"})
		org, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
		if err != nil || len(org.Msg.Organizations) == 0 {
			t.Fatalf("list organizations: %v", err)
		}
		r.Msg.OrganizationId = org.Msg.Organizations[0].Id
		r.Header().Set("Idempotency-Key", "acl-1")
		res, err := c.Org.CreateProject(ctx, r)
		if err != nil {
			t.Fatalf("keyed CreateProject: %v", err)
		}
		return res
	}
	first, again := keyed(), keyed()
	if again.Header().Get("Idempotent-Replayed") != "true" || again.Msg.Id != first.Msg.Id {
		t.Fatalf("the keyed retry was not replayed: %q, ids %s and %s", again.Header().Get("Idempotent-Replayed"), first.Msg.Id, again.Msg.Id)
	}

	env1, err := createEnv(ctx, c, prj, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "e2"); err != nil {
		t.Fatal(err)
	}
	_, err = createEnv(ctx, c, prj, "e3")
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")

	streamCtx, stop := context.WithCancel(ctx)
	stream, err := c.Env.WatchEnvironment(streamCtx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env1}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("the stream gave nothing: %v", stream.Err())
	}
	stop()
	stream.Close()

	if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env1})); err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "e4"); err != nil {
		t.Fatalf("the slot of a deleted environment did not come back: %v", err)
	}
	if n := running(t, c); n != 2 {
		t.Fatalf("GetUsage counts %d running environments, want 2", n)
	}

	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if m.Sum("edge_fail_open_decisions_total") != 0 || m.Sum("edge_redis_errors_total") != 0 {
		t.Errorf("the edge decided without Redis (%v calls) or Redis failed (%v errors)",
			m.Sum("edge_fail_open_decisions_total"), m.Sum("edge_redis_errors_total"))
	}
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr, Username: "admin", Password: "admin-password"})
	defer admin.Close()
	denied, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	if len(denied) > 0 {
		t.Errorf("Redis denied the edge's user %d times: %v", len(denied), denied)
	}
}

// wantFreePlanCount checks the answer to a fresh free subject's call i
// (from 0), the first sent at start: admitted, with what Redis counts left
// of the plan's bucket. The bucket holds 100 and gets one call back each
// second, so that is 99-i plus the calls the rate gave back since start
// (none on a quiet machine, where the calls take milliseconds).
func wantFreePlanCount(t *testing.T, res *http.Response, body map[string]any, i int, start time.Time) {
	t.Helper()
	elapsed := time.Since(start)
	left, err := strconv.Atoi(res.Header.Get("X-RateLimit-Remaining"))
	if most := min(99, 99-i+int(elapsed/time.Second)); res.StatusCode != http.StatusOK || err != nil || left < 99-i || left > most {
		t.Fatalf("call %d: %d, remaining %q, %v; want 200 and Redis' exact count: %d, at most %d after %v",
			i, res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), body, 99-i, most, elapsed)
	}
}
