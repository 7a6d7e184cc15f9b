package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// failedConformance is a conformance run over two replicas whose plan tiny
// admitted more than allowed from its third second, on a client that fell
// behind its schedule.
func failedConformance() *Report {
	tiny := Plan{Name: "tiny", RatePerMinute: 60, Burst: 10}
	rate, allowed := limitLines(tiny, 2, 4)
	lat := []LatencyPoint{{Count: 20, P50: 1200, P99: 4000, Max: 5000}, {Count: 3, P50: 900, P99: 2000, Max: 2000}, {}, {Count: 8, P50: 800, P99: 1500, Max: 1500}}
	rep := &Report{Scenario: Conformance, RunID: "tp1", Started: time.Now(), Duration: Seconds(4 * time.Second), Elapsed: Seconds(4 * time.Second),
		Protocol: Connect, Edges: []string{"http://127.0.0.1:8080", "http://127.0.0.1:8090"}, Model: "open", Rate: 20, Planned: 80,
		Totals: Totals{Sent: 60, OK: 44, Refused: 16},
		Plans: []PlanResult{{Plan: tiny, Subjects: 2, Sent: 60, Admitted: 44, Refused: 16, Allowed: 24, Tolerance: 4, Verdict: Fail,
			Why: []string{"free-lt-1: admitted 22, more than allowed 12 + 2"}, FailedAt: secondsAt(3)}},
		Thresholds: []Check{{Name: "achieved rate", Verdict: Inconclusive, Problems: []string{"the tool sent 60 of the 80 calls it planned"}, FailedAt: secondsAt(2)}},
		Timeline:   []Series{{Group: "tiny", Buckets: []Bucket{{OK: 20}, {OK: 3, Refused: 10}, {OK: 12}, {OK: 9, Refused: 6}}, Latency: lat, Limit: rate, Allowed: allowed}},
		Replicas: []Series{
			{Group: "edge#1", Buckets: []Bucket{{OK: 10}, {OK: 2, Refused: 5}, {OK: 6}, {OK: 5, Refused: 3}}},
			{Group: "edge#2", Buckets: []Bucket{{OK: 10}, {OK: 1, Refused: 5}, {OK: 6}, {OK: 4, Refused: 3}}},
		},
	}
	rep.decide()
	return rep
}

// TestReportPageDrawsItsChartsInHeadlessChromium opens report pages as
// files in headless Chromium (Debian's package) with no network to reach,
// and reads the DOM the embedded ECharts drew: latency over time, admitted
// against allowed for the plan with its failure marked where it failed,
// calls per second, each replica's share, and the overhead's percentiles.
func TestReportPageDrawsItsChartsInHeadlessChromium(t *testing.T) {
	chromium := testenv.Command(t, "chromium")
	overhead := &Report{Scenario: Overhead, RunID: "tp2", Started: time.Now(), Duration: Seconds(time.Second), Verdict: Pass,
		Timeline: []Series{{Group: "backend", Buckets: []Bucket{{OK: 50}}, Latency: []LatencyPoint{{Count: 50, P50: 900, P99: 3000, Max: 3000}}},
			{Group: "edge", Buckets: []Bucket{{OK: 50}}, Latency: []LatencyPoint{{Count: 50, P50: 1300, P99: 5000, Max: 5000}}}},
		Overhead: &OverheadResult{Call: "ListOrganizations",
			Backend: TargetLatency{Latency: LatencySummary{P50: 900, P90: 1500, P99: 3000, P999: 3000}},
			Edge:    TargetLatency{Latency: LatencySummary{P50: 1300, P90: 2100, P99: 5000, P999: 5000}}}}
	tests := []struct {
		name string
		rep  *Report
		want map[string][]string // chart element id → texts drawn in it
	}{
		{"conformance", failedConformance(), map[string][]string{
			"chart-latency":   {"p50 tiny", "p99 tiny", "FAIL plan tiny", "INCONCLUSIVE achieved rate"},
			"chart-plan-tiny": {"admitted", "allowed (burst + rate × t)", "refused", "FAIL plan tiny"},
			"chart-calls":     {"admitted tiny", "refused tiny", "rate limit tiny", "FAIL plan tiny"},
			"chart-replicas":  {"admitted by edge#1", "admitted by edge#2", "refused by edge#2"},
		}},
		{"overhead", overhead, map[string][]string{
			"chart-latency":  {"p50 backend", "p99 edge"},
			"chart-overhead": {"backend", "edge", "p99.9"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.html")
			if err := tc.rep.writeFiles(filepath.Join(dir, "report.json"), path); err != nil {
				t.Fatal(err)
			}
			page, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), echartsJS) {
				t.Fatal("the page does not hold the charting library")
			}
			// The page's own markup, without the library's code.
			own := strings.Replace(string(page), echartsJS, "", 1)
			if m := regexp.MustCompile(`(?i)<(script|link|img|iframe)[^>]+(src|href)=`).FindString(own); m != "" {
				t.Fatalf("the page loads %q from elsewhere: it must work offline", m)
			}
			dom := dumpDOM(t, chromium, path)
			for id, texts := range tc.want {
				chart := element(t, dom, id)
				if !strings.Contains(chart, "<svg") {
					t.Errorf("%s: nothing drawn:\n%.2000s", id, chart)
					continue
				}
				for _, text := range texts {
					if !strings.Contains(chart, ">"+escapeText(text)+"<") {
						t.Errorf("%s: no %q drawn", id, text)
					}
				}
			}
		})
	}
}

// dumpDOM loads the file in headless Chromium and returns the DOM once its
// scripts have run.
func dumpDOM(t *testing.T, chromium, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "file://"+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// element returns the markup of the element of that id, up to the next
// heading.
func element(t *testing.T, dom, id string) string {
	t.Helper()
	at := strings.Index(dom, `id="`+id+`"`)
	if at < 0 {
		t.Fatalf("no element %s in the DOM", id)
	}
	rest := dom[at:]
	if end := strings.Index(rest, "<h2"); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// escapeText is text as the DOM serializes it.
func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func TestTheEmbeddedChartingLibraryIsTheVersionTheREADMENames(t *testing.T) {
	if !strings.Contains(echartsJS, `version:"`+echartsVersion+`"`) {
		t.Fatalf("web/echarts.common.min.js is not ECharts %s (web/README.md)", echartsVersion)
	}
	readme, err := os.ReadFile("web/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "`echarts` "+echartsVersion) {
		t.Fatalf("web/README.md does not name ECharts %s", echartsVersion)
	}
}
