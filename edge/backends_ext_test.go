package edge_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/orgedge/edge/internal/testkit"
)

// deadAddress returns a loopback address where nothing listens.
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// With one backend of three down, its share spreads evenly over the two
// others, one call at a time and under load (docs/edge.md: within 10% of
// even), instead of all of it going to the backend after it in the list.
func TestUpstreamDownBackendsShareSpreadsEvenly(t *testing.T) {
	t.Parallel()
	iss := testkit.StartIssuer(t)
	first, last := startCountingBackend(t), startCountingBackend(t)
	cfg := testkit.EdgeConfig(t, first.url, iss.URL())
	cfg.Upstream.URLs = []string{first.url, "http://" + deadAddress(t), last.url}
	plan := cfg.Limits.Plans["enterprise"]
	plan.RequestsPerMinute, plan.Burst, plan.RequestsPerDay = 1_000_000, 10_000, 0
	cfg.Limits.Plans["enterprise"] = plan
	e := testkit.StartEdge(t, cfg)
	org := testkit.NewClients(e.URL, testkit.HTTPJSON, testkit.Token(t, iss.URL(), "enterprise-down")).Org
	for _, workers := range []int{1, 8} {
		before := []int64{first.calls.Load(), last.calls.Load()}
		if errs := callMany(ctxT(t), org, 600, workers); len(errs) > 0 {
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
	before := make([]int64, len(bes))
	for i, b := range bes {
		before[i] = b.calls.Load()
	}
	if errs := callMany(ctxT(t), testkit.NewClients(e.URL, testkit.HTTPJSON, token).Org, 600, 4); len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	counts := make([]int64, len(bes))
	for i, b := range bes {
		counts[i] = b.calls.Load() - before[i]
	}
	wantEvenSpread(t, counts)
}
