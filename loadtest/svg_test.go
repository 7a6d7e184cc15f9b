package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"testing"
	"time"
)

// svgSeries parses the chart as XML (failing on anything not well formed)
// and returns "group/series" for every polyline and bar.
func svgSeries(t *testing.T, b []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var found []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, b)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
			if se.Name.Space != "http://www.w3.org/2000/svg" {
				t.Fatalf("root element in namespace %q", se.Name.Space)
			}
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch {
		case se.Name.Local == "polyline" && attr["class"] == "series":
			found = append(found, attr["data-group"]+"/"+attr["data-series"])
		case se.Name.Local == "rect" && attr["class"] == "bar":
			found = append(found, attr["data-percentile"]+"/"+attr["data-series"])
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	return found
}

func TestConformanceChartHasAdmittedRefusedAndTheLimitPerPlan(t *testing.T) {
	free := Plan{Name: "free", RatePerMinute: 60, Burst: 100, Daily: 10000}
	rate, allowed := limitLines(free, 2, 3)
	rep := &Report{Scenario: Conformance, RunID: "abc", Started: time.Now(), Protocol: GRPC, Verdict: Pass,
		Plans: []PlanResult{{Plan: free, Subjects: 2, Verdict: Pass}},
		Timeline: []Series{
			{Group: "free <&>", Buckets: []Bucket{{OK: 200}, {OK: 2, Refused: 20}, {OK: 2, Refused: 21}}, Limit: rate, Allowed: allowed},
			{Group: "pro", Buckets: []Bucket{{OK: 5, Failed: 1}}},
		}}
	got := svgSeries(t, chart(rep))
	want := []string{"free <&>/admitted", "free <&>/refused", "free <&>/limit",
		"free <&>/admitted-cumulative", "free <&>/refused-cumulative", "free <&>/allowed-cumulative",
		"pro/admitted", "pro/refused", "pro/errors"}
	if !slices.Equal(got, want) {
		t.Fatalf("series %q, want %q", got, want)
	}
}

func TestOverheadChartHasBothTargetsAtEachPercentile(t *testing.T) {
	rep := &Report{Scenario: Overhead, Started: time.Now(), Verdict: Pass,
		Timeline: []Series{{Group: "backend", Buckets: []Bucket{{OK: 50}}}, {Group: "edge", Buckets: []Bucket{{OK: 50}}}},
		Overhead: &OverheadResult{Call: "ListOrganizations",
			Backend: TargetLatency{Latency: LatencySummary{P50: 900, P90: 1500, P99: 4000, P999: 9000}},
			Edge:    TargetLatency{Latency: LatencySummary{P50: 1300, P90: 2100, P99: 5000, P999: 9500}}}}
	got := svgSeries(t, chart(rep))
	for _, want := range []string{"backend/admitted", "edge/admitted", "p50/backend", "p50/edge", "p99.9/backend", "p99.9/edge"} {
		if !slices.Contains(got, want) {
			t.Errorf("no %s in %q", want, got)
		}
	}
}

func TestAnEmptyRunStillDrawsAValidChart(t *testing.T) {
	svgSeries(t, chart(&Report{Scenario: Operations, Started: time.Now(), Verdict: Fail, Timeline: []Series{{Group: "calls"}}}))
}
