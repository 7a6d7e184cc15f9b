package edge_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testkit"
)

// With one backend of three down, its share spreads evenly over the two
// others, one call at a time and under load (docs/edge.md: within 10% of
// even), instead of all of it going to the backend after it in the list.
func TestUpstreamDownBackendsShareSpreadsEvenly(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	first, last := startCountingBackend(t), startCountingBackend(t)
	cfg := testkit.EdgeConfig(t, first.url, iss.URL())
	cfg.Upstream.URLs = []string{first.url, "http://" + testkit.DeadAddr(t), last.url}
	plan := cfg.Limits.Plans["enterprise"]
	plan.RequestsPerMinute, plan.Burst, plan.RequestsPerDay = 1_000_000, 10_000, 0
	cfg.Limits.Plans["enterprise"] = plan
	e := testkit.StartEdge(t, cfg)
	org := testkit.NewClients(e.URL, testkit.HTTPJSON, testkit.Token(t, iss.URL(), "enterprise-down")).Org
	for _, workers := range []int{1, 8} {
		before := []int64{first.calls.Load(), last.calls.Load()}
		if errs := callMany(t.Context(), org, 300, workers); len(errs) > 0 {
			t.Fatalf("%d workers: %d calls failed, first: %v", workers, len(errs), errs[0])
		}
		t.Logf("%d workers: %d and %d calls", workers, first.calls.Load()-before[0], last.calls.Load()-before[1])
		wantEvenSpread(t, []int64{first.calls.Load() - before[0], last.calls.Load() - before[1]})
	}
}

// A caller's own deadline is not its backend's failure: eight gRPC-Web
// calls that end by their grpc-timeout of 1ns eject no backend, and the
// calls after them still spread over all three.
func TestUpstreamCallersDeadlinesEjectNoBackend(t *testing.T) {
	t.Parallel()
	bes, e, token := startThreeBackends(t)
	impatient := clientsSending(e.URL, testkit.GRPCWeb, token, http.Header{"Grpc-Timeout": {"1n"}}).Org
	if errs := callMany(ctxT(t), impatient, 8, 1); len(errs) != 8 {
		t.Fatalf("%d of 8 calls with a 1ns deadline failed, want all", len(errs))
	}
	// They ran out before reaching a backend: the client's choice.
	waitMetric(t, e, 8, "edge_deadline_exceeded_total", "origin", "client")
	before := make([]int64, len(bes))
	for i, b := range bes {
		before[i] = b.calls.Load()
	}
	if errs := callMany(t.Context(), testkit.NewClients(e.URL, testkit.HTTPJSON, token).Org, 300, 4); len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	counts := make([]int64, len(bes))
	for i, b := range bes {
		counts[i] = b.calls.Load() - before[i]
	}
	wantEvenSpread(t, counts)
}

// waitMetric waits until the edge's metric named name, with labels, sums
// to want.
func waitMetric(t *testing.T, e *testkit.Edge, want float64, name string, labels ...string) {
	t.Helper()
	testkit.ScrapeUntil(t, e.AdminURL+"/metrics", fmt.Sprintf("%s%v to be %v", name, labels, want), func(m testkit.Samples) bool {
		return m.Sum(name, labels...) == want
	})
}

// A backend that accepts calls and never answers (frozen, as under kill
// -STOP) is taken out by the health checks, with no customer call to find
// it: afterwards no call goes to it or waits for it, and its per-backend
// metrics say so. Once it answers again, its checks bring it back.
func TestUpstreamFrozenBackendIsTakenOutByHealthChecks(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	live, frozen := startCountingBackend(t), startCountingBackend(t)
	fp := testkit.StartFaultProxy(t, strings.TrimPrefix(frozen.url, "http://"))
	cfg := testkit.EdgeConfig(t, live.url, iss.URL())
	cfg.Upstream.URLs = []string{live.url, "http://" + fp.Addr}
	cfg.Upstream.HealthCheck.Interval, cfg.Upstream.HealthCheck.Timeout = time.Second, time.Second
	cfg.Requests.MaxUnaryTimeout = 3 * time.Second // a call the frozen backend holds fails then
	plan := cfg.Limits.Plans["enterprise"]
	plan.RequestsPerMinute, plan.Burst, plan.RequestsPerDay = 1_000_000, 10_000, 0
	cfg.Limits.Plans["enterprise"] = plan
	e := testkit.StartEdge(t, cfg)
	org := testkit.NewClients(e.URL, testkit.HTTPJSON, testkit.Token(t, iss.URL(), "enterprise-frozen")).Org
	if errs := callMany(ctxT(t), org, 40, 2); len(errs) > 0 || frozen.calls.Load() == 0 {
		t.Fatalf("before the freeze: %d calls failed, %d reached the second backend", len(errs), frozen.calls.Load())
	}

	fp.Stall()
	waitMetric(t, e, 0, "edge_backend_healthy", "backend", fp.Addr) // no customer call made
	seen := frozen.calls.Load()
	if errs := callMany(ctxT(t), org, 100, 2); len(errs) > 0 {
		t.Fatalf("with one backend frozen: %d of 100 calls failed (a call sent to it waits out its deadline), first: %v", len(errs), errs[0])
	}
	if n := frozen.calls.Load() - seen; n > 0 {
		t.Errorf("the frozen backend got %d calls after its checks failed", n)
	}
	if s := testkit.Scrape(t, e.AdminURL+"/metrics"); s.Sum("edge_backend_calls_total", "backend", strings.TrimPrefix(live.url, "http://"), "result", "answered") < 100 {
		t.Errorf("edge_backend_calls_total of the live backend: %v answered, want at least 100", s.Sum("edge_backend_calls_total", "backend", strings.TrimPrefix(live.url, "http://")))
	}

	fp.Heal()
	waitMetric(t, e, 1, "edge_backend_healthy", "backend", fp.Addr)
	seen = frozen.calls.Load()
	if errs := callMany(ctxT(t), org, 40, 2); len(errs) > 0 || frozen.calls.Load() == seen {
		t.Errorf("after the thaw: %d calls failed, %d reached the thawed backend", len(errs), frozen.calls.Load()-seen)
	}
}
