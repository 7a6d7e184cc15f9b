package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestVerdictsAgainstRealEdgesNameWhatTheEdgeDid runs the conformance
// scenario, as a user runs the command, against four real edges started
// here on one issuer and backend, all at once: a correct one (PASS), one
// whose plan admits more than the tool is told (FAIL, naming the
// over-admission), one that closes connections past two per address (FAIL,
// naming the reason from the edge's own metrics) and a correct one the
// tool cannot keep up with, one call in flight at a rate it cannot reach
// (INCONCLUSIVE, its own exit status, saying why). The last two, which
// load the machine, run after the first two.
func TestVerdictsAgainstRealEdgesNameWhatTheEdgeDid(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	edge := func(rpm, burst int, change func(*config.Config)) *testkit.Edge {
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		// The development issuer's users claim plan free, which this edge
		// does not know: every subject gets the default plan, tiny.
		cfg.Limits.Plans = map[string]config.Plan{"tiny": {RequestsPerMinute: rpm, Burst: burst}}
		cfg.Limits.DefaultPlan = "tiny"
		if change != nil {
			change(cfg)
		}
		return testkit.StartEdge(t, cfg)
	}
	tests := []struct {
		name   string
		edge   *testkit.Edge
		plan   string
		more   []string
		status int
		want   []string // in the output, in this order
		heavy  bool     // runs after the others, which it would starve of CPU
	}{
		{"correct edge", edge(60, 10, nil), "tiny=60/10/0", nil,
			exitPass, []string{"the edge during the run", "VERDICT PASS\nreport "}, false},
		{"edge that admits too much", edge(60, 30, nil), "tiny=60/10/0", nil,
			exitFail, []string{"VERDICT FAIL\n", "because plan tiny:", "more than allowed"}, false},
		// 500 calls a second over HTTP/1.1: several connections at once.
		{"edge that closes connections", edge(6000, 100, func(c *config.Config) { c.Listen.MaxConnectionsPerAddress = 2 }), "tiny=6000/100/0", nil,
			exitFail, []string{"VERDICT FAIL\n", "because error rate:", "because edge closed", "connections (per_address: more open connections from one address than listen.max_connections_per_address)"}, true},
		{"client that cannot keep up", edge(600_000, 100, nil), "tiny=600000/100/0", []string{"-max-inflight", "1"},
			exitInconclusive, []string{"WARNING: ", "the client cannot keep up", "VERDICT INCONCLUSIVE\n", "because achieved rate: the tool sent", "it could not keep up"}, true},
	}
	type outcome struct {
		status         int
		stdout, stderr string
	}
	results := make([]outcome, len(tests))
	for _, heavy := range []bool{false, true} {
		var wg sync.WaitGroup
		for i, tc := range tests {
			if tc.heavy != heavy {
				continue
			}
			args := append([]string{"-scenario", "conformance", "-edge", tc.edge.URL, "-admin", tc.edge.AdminURL, "-issuer", iss.URL(),
				"-plans", tc.plan, "-subjects", "tiny=2", "-duration", "3s", "-out", filepath.Join(t.TempDir(), "r.json")}, tc.more...)
			wg.Go(func() {
				var stdout, stderr bytes.Buffer
				status := mainExit(args, &stdout, &stderr)
				results[i] = outcome{status, stdout.String(), stderr.String()}
			})
		}
		wg.Wait()
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := results[i]
			out := got.stderr + got.stdout
			if got.status != tc.status {
				t.Fatalf("exit status %d, want %d:\n%s", got.status, tc.status, out)
			}
			inOrder(t, out, tc.want)
		})
	}
}

// TestOverheadVerdictFollowsTheUsersThresholds: the same overhead run
// against a real edge, whose way to the backend takes 50ms more than the
// tool's, passes a generous threshold on what the edge adds and fails one
// under those 50ms, naming it; without a threshold it says PASS means
// only that no call failed.
func TestOverheadVerdictFollowsTheUsersThresholds(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	// The edge adds at least the delay at every percentile, whatever the
	// machine's noise (which alone can make the edge's p99 the lower).
	slow := testkit.StartFaultProxy(t, strings.TrimPrefix(be.URL, "http://"))
	slow.Delay(50 * time.Millisecond)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, "http://"+slow.Addr, iss.URL()))
	tests := []struct {
		name   string
		more   []string
		status int
		want   []string
	}{
		{"generous", []string{"-max-overhead-p50", "1m", "-max-overhead-p99", "1m", "-max-p99", "1m"}, exitPass,
			[]string{"edge adds at p99", "≤ 60s (-max-overhead-p99)", "PASS", "VERDICT PASS\n"}},
		{"under what the edge adds", []string{"-max-overhead-p50", "10ms"}, exitFail,
			[]string{"edge adds at p50", "≤ 10ms (-max-overhead-p50)", "FAIL", "VERDICT FAIL\n", "because edge adds at p50: +", "above -max-overhead-p50 10ms"}},
		{"none", nil, exitPass,
			[]string{"no latency threshold was stated, so PASS says only that no call failed", "VERDICT PASS\n"}},
	}
	type outcome struct {
		status int
		out    string
	}
	results := make([]outcome, len(tests))
	var wg sync.WaitGroup
	for i, tc := range tests {
		args := append([]string{"-scenario", "overhead", "-edge", e.URL, "-admin", e.AdminURL, "-backend", be.URL, "-issuer", iss.URL(),
			"-rate", "10", "-duration", "2s", "-out", filepath.Join(t.TempDir(), "r.json")}, tc.more...)
		wg.Go(func() {
			var stdout, stderr bytes.Buffer
			status := mainExit(args, &stdout, &stderr)
			results[i] = outcome{status, stderr.String() + stdout.String()}
		})
	}
	wg.Wait()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := results[i]
			if got.status != tc.status {
				t.Fatalf("exit status %d, want %d:\n%s", got.status, tc.status, got.out)
			}
			inOrder(t, got.out, tc.want)
		})
	}
}

// inOrder fails unless out holds each of want, in that order.
func inOrder(t *testing.T, out string, want []string) {
	t.Helper()
	rest := out
	for _, w := range want {
		at := strings.Index(rest, w)
		if at < 0 {
			t.Fatalf("no %q (after the earlier parts) in:\n%s", w, out)
		}
		rest = rest[at+len(w):]
	}
}

// TestOperationsPassesAgainstACorrectEdge: the operations scenario, as a
// user runs it, against a real edge with the specification's tables:
// every check passes (each operation limit judged by when the edge can
// have admitted each call).
func TestOperationsPassesAgainstACorrectEdge(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, be.URL, iss.URL()))
	var stdout, stderr bytes.Buffer
	status := mainExit([]string{"-scenario", "operations", "-edge", e.URL, "-admin", e.AdminURL, "-issuer", iss.URL(),
		"-duration", "60s", "-out", filepath.Join(t.TempDir(), "r.json")}, &stdout, &stderr)
	out := stderr.String() + stdout.String()
	if status != exitPass {
		t.Fatalf("exit status %d, want %d:\n%s", status, exitPass, out)
	}
	inOrder(t, out, []string{"SearchCatalog 30/min", "PASS", "ValidateBlueprint 30/min", "PASS", "CreateEnvironment 10/min", "PASS",
		"WatchEnvironment streams", "PASS", "free: concurrent environments", "PASS", "VERDICT PASS\n"})
}
