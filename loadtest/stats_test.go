package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestLatencyPercentilesFromTheHDRHistogram(t *testing.T) {
	l := newLatency()
	// 1 ms to 1000 ms, one of each: p50 is 500 ms, p99.9 is 999 ms.
	for i := 1; i <= 1000; i++ {
		l.Record(time.Duration(i) * time.Millisecond)
	}
	s := l.Summary()
	near := func(name string, got int64, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want)/want > 0.001 { // three significant digits
			t.Errorf("%s = %dµs, want %.0fµs ±0.1%%", name, got, want)
		}
	}
	if s.Count != 1000 {
		t.Fatalf("count %d", s.Count)
	}
	near("p50", s.P50, 500_000)
	near("p90", s.P90, 900_000)
	near("p99", s.P99, 990_000)
	near("p99.9", s.P999, 999_000)
	near("max", s.Max, 1_000_000)
	near("mean", int64(s.Mean), 500_500)
}

func TestLatencyOutOfRangeCountsAsTheRangesEnds(t *testing.T) {
	l := newLatency()
	l.Record(0)
	l.Record(2 * time.Minute)
	s := l.Summary()
	if s.Count != 2 || s.P50 != 1 || s.Max < 59_000_000 {
		t.Fatalf("%+v", s)
	}
}

func TestMicrosReadsInTheRightUnit(t *testing.T) {
	for us, want := range map[int64]string{850: "850µs", 1500: "1.5ms", 12_345: "12.3ms", 1_250_000: "1.25s"} {
		if got := micros(us); got != want {
			t.Errorf("micros(%d) = %q, want %q", us, got, want)
		}
	}
	if got := signedMicros(-1500); got != "-1.5ms" {
		t.Errorf("signedMicros(-1500) = %q", got)
	}
}

func TestTimelineCountsPerSecondByGroup(t *testing.T) {
	start := time.Now()
	tl := newTimeline(start)
	tl.Add("free", start.Add(100*time.Millisecond), OK, 2*time.Millisecond)
	tl.Add("free", start.Add(1500*time.Millisecond), Refused, time.Millisecond)
	tl.Add("pro", start.Add(2100*time.Millisecond), Failed, time.Second)
	tl.Add("pro", start.Add(-time.Millisecond), OK, 3*time.Millisecond) // sent just before start: second 0
	series := tl.Series(4)
	if len(series) != 2 || series[0].Group != "free" || series[1].Group != "pro" {
		t.Fatalf("%+v", series)
	}
	if b := series[0].Buckets; len(b) != 4 || b[0].OK != 1 || b[1].Refused != 1 {
		t.Fatalf("free %+v", b)
	}
	if b := series[1].Buckets; b[0].OK != 1 || b[2].Failed != 1 {
		t.Fatalf("pro %+v", b)
	}
	// Answers' latency per second (a failed call has none); a percentile
	// reads as the upper bound of its bucket, at most 40% high.
	if l := series[0].Latency; len(l) != 4 || l[0].Count != 1 || l[0].P50 < 2000 || l[0].P50 > 2800 || l[0].Max != 2000 || l[1].Count != 1 {
		t.Fatalf("free latency %+v", l)
	}
	if l := series[1].Latency; l[0].Count != 1 || l[2].Count != 0 {
		t.Fatalf("pro latency %+v", l)
	}
}

func TestProgressLineSaysElapsedShareETASentOkRefusedErrorsAndRate(t *testing.T) {
	var m Meter
	m.sent.Add(10)
	m.ok.Add(7)
	m.refused.Add(2)
	m.failed.Add(1)
	var out strings.Builder
	done := make(chan struct{})
	close(done)
	progress(done, &out, &m, time.Now().Add(-5*time.Second), 20*time.Second, 0)
	if got := out.String(); !strings.Contains(got, "5s/20s  25% ETA 15s   sent 10  ok 7  refused 2  errors 1  rate 2/s") || strings.Contains(got, "WARNING") {
		t.Fatalf("progress %q", got)
	}
}

func TestProgressLineWarnsWhenTheRateFallsUnderTheTarget(t *testing.T) {
	tests := []struct {
		elapsed time.Duration
		sent    int64
		target  float64
		warn    string
	}{
		{3 * time.Second, 54, 410, "WARNING: 18/s sent of 410/s planned: the client cannot keep up"},
		{3 * time.Second, 1200, 410, ""},     // within 5%
		{3 * time.Second, 54, 0, ""},         // no target: a closed model
		{500 * time.Millisecond, 0, 410, ""}, // before the first second
	}
	for _, tc := range tests {
		got := progressLine(tc.elapsed, 10*time.Second, tc.sent, tc.sent, 0, 0, 0, 18, tc.target)
		if tc.warn == "" && strings.Contains(got, "WARNING") || tc.warn != "" && !strings.HasSuffix(got, "  "+tc.warn) {
			t.Errorf("%d sent in %v of %v/s: %q, want warning %q", tc.sent, tc.elapsed, tc.target, got, tc.warn)
		}
	}
}
