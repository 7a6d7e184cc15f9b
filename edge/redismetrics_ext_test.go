package edge_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestRedisTroubleIsVisibleInTheMetrics stalls Redis, then stops it, and
// checks what an operator's dashboard reads: timeouts and errors for every
// part of the edge that uses Redis, the breaker's state one series per
// state, its openings, and the calls admitted and refused on the local
// share.
func TestRedisTroubleIsVisibleInTheMetrics(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Redis.Addr = rs.Addr
		c.Redis.Timeout = 300 * time.Millisecond
		c.Limits.OnRedisFailure, c.Limits.LocalShare = config.FailOpen, 0.5
		tinyPlan(4)(c)
	})
	url := s.edge.AdminURL + "/metrics"
	state := func(m testkit.Samples) map[string]float64 {
		out := map[string]float64{}
		for _, st := range []string{"closed", "open", "half_open"} {
			out[st] = m.Sum("edge_redis_breaker_state", "state", st)
		}
		return out
	}
	m := testkit.Scrape(t, url)
	if st := state(m); st["closed"] != 1 || st["open"] != 0 || st["half_open"] != 0 {
		t.Fatalf("breaker state before any trouble: %v, want closed", st)
	}
	tok := token("free-metrics")
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Fatalf("before the trouble: %d", res.StatusCode)
	}

	// A stalled Redis (a long fork, a slow command): every call passes
	// its deadline.
	admin := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer admin.Close()
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	keyed := req(&svcv1.CreateOrganizationRequest{Name: "stalled", BillingEmail: "a@b.example"})
	keyed.Header().Set("Idempotency-Key", "stalled-1")
	_, _ = testkit.NewClients(s.edge.URL, testkit.GRPC, tok).Org.CreateOrganization(ctxT(t), keyed)
	m = testkit.Scrape(t, url)
	for _, user := range []string{"limits", "idempotency"} {
		if m.Sum("edge_redis_errors_total", "user", user, "kind", "timeout") < 1 {
			t.Errorf("no timeout counted for %s while Redis stalled:\n%v", user, m.Sum("edge_redis_errors_total"))
		}
	}

	// A stopped Redis: errors for every user, the breaker opens, and the
	// local share decides.
	rs.Stop()
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("pro-metrics-env"))
	_, _ = c.Env.CreateEnvironment(ctxT(t), req(&svcv1.CreateEnvironmentRequest{ProjectId: "prj_none", Name: "e", BlueprintId: "bp"}))
	if stream, err := c.Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: "env_none"})); err == nil {
		stream.Receive()
		stream.Close()
	}
	statuses := map[int]int{}
	for range 6 {
		res, _ := jsonCall(t, s.edge.URL, token("free-metrics-outage"), listOrgs, "{}")
		statuses[res.StatusCode]++
	}
	// 0.5 of a burst of 4: two admitted, then refused.
	if statuses[http.StatusOK] != 2 || statuses[http.StatusTooManyRequests] != 4 {
		t.Fatalf("during the outage: %v, want 2 admitted and 4 refused on the local share", statuses)
	}
	m = testkit.Scrape(t, url)
	for _, user := range []string{"limits", "quotas", "streams"} {
		if m.Sum("edge_redis_errors_total", "user", user, "kind", "error") < 1 {
			t.Errorf("no error counted for %s with Redis stopped", user)
		}
	}
	if st := state(m); st["open"]+st["half_open"] != 1 || st["closed"] != 0 {
		t.Errorf("breaker state during the outage: %v, want one of open or half_open", st)
	}
	if got := m.Sum("edge_redis_breaker_opens_total"); got != 1 {
		t.Errorf("edge_redis_breaker_opens_total %v, want 1", got)
	}
	if got := m.Sum("edge_fail_open_decisions_total", "outcome", "allowed"); got < 2 {
		t.Errorf("edge_fail_open_decisions_total{outcome=allowed} %v, want at least the 2 admitted", got)
	}
	if got := m.Sum("edge_fail_open_decisions_total", "outcome", "refused"); got != 4 {
		t.Errorf("edge_fail_open_decisions_total{outcome=refused} %v, want 4", got)
	}
}
