package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestConformancePassesAgainstARealEdgeInEveryProtocol runs the conformance
// scenario for three seconds in each protocol, all at once, against an issuer,
// a backend and an edge started here (the edge on the real Redis of
// TEST_REDIS_ADDR), with a small plan so that limits bind within seconds.
func TestConformancePassesAgainstARealEdgeInEveryProtocol(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	// The development issuer's users claim plan free, which this edge does
	// not know: every subject gets the default plan, tiny.
	cfg.Limits.Plans = map[string]config.Plan{"tiny": {RequestsPerMinute: 60, Burst: 10}}
	cfg.Limits.DefaultPlan = "tiny"
	e := testkit.StartEdge(t, cfg)

	// All protocols at once, whatever -parallel allows: a few seconds in all.
	type outcome struct {
		o    *Options
		rep  *Report
		err  error
		took time.Duration // the run, as long as a loaded machine makes it
	}
	results := make([]outcome, len(allProtocols))
	var wg sync.WaitGroup
	for i, p := range allProtocols {
		o, err := parse("-scenario", "conformance", "-edge", e.URL, "-issuer", iss.URL(), "-protocol", string(p),
			"-plans", "tiny=60/10/0", "-subjects", "tiny=2", "-duration", "3s", "-out", filepath.Join(t.TempDir(), "r.json"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			rep, err := run(ctx, o)
			results[i] = outcome{o, rep, err, time.Since(start)}
		})
	}
	wg.Wait()

	for i, p := range allProtocols {
		t.Run(string(p), func(t *testing.T) {
			o, rep, err := results[i].o, results[i].rep, results[i].err
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			rep.writeText(&text)
			if rep.Verdict != Pass || rep.Totals.Malformed != 0 || len(rep.Plans) != 1 {
				t.Fatalf("verdict %s, %d malformed refusals:\n%s", rep.Verdict, rep.Totals.Malformed, text.String())
			}
			pr := rep.Plans[0]
			// Two new subjects: a burst of 10 each (less the probe) and one a
			// second for the three seconds of the run, or for as long as
			// the run took on a loaded machine (the upper bound follows it).
			refills := int(results[i].took/time.Second) + 1
			if pr.Refused == 0 || pr.Admitted < 2*(9+2) || pr.Admitted > 2*(9+refills) {
				t.Fatalf("admitted %d, refused %d in %v:\n%s", pr.Admitted, pr.Refused, results[i].took, text.String())
			}
			jsonPath, htmlPath := outputPaths(o.Out, o.Scenario, rep.Started)
			if err := rep.writeFiles(jsonPath, htmlPath); err != nil {
				t.Fatal(err)
			}
			page, err := os.ReadFile(htmlPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), `id="chart-plan-tiny"`) {
				t.Fatalf("no chart of plan tiny in %s", htmlPath)
			}
		})
	}

	// Nothing the runs started is left running.
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := ourGoroutines()
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines outlived the run:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ourGoroutines returns the stacks of goroutines running this package's
// code, other than tests.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "main.") && !strings.Contains(g, "main.Test") && !strings.Contains(g, "main.main") {
			out = append(out, g)
		}
	}
	return out
}
