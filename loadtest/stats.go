package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Meter counts calls for the progress line.
type Meter struct {
	sent, ok, refused, aborted, failed, unfinished atomic.Int64
}

func (m *Meter) add(o Outcome) {
	switch o {
	case OK:
		m.ok.Add(1)
	case Refused:
		m.refused.Add(1)
	case Aborted:
		m.aborted.Add(1)
	case Unfinished:
		m.unfinished.Add(1)
	default:
		m.failed.Add(1)
	}
}

// Latency is an HDR histogram of call latencies in microseconds, from 1 µs
// to 60 s at three significant digits; safe for concurrent use.
type Latency struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

const maxLatencyMicros = 60_000_000

func newLatency() *Latency {
	return &Latency{h: hdrhistogram.New(1, maxLatencyMicros, 3)}
}

// Record adds one latency; longer than the histogram's range counts as its
// maximum.
func (l *Latency) Record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), maxLatencyMicros)
	l.mu.Lock()
	_ = l.h.RecordValue(us) // in range by construction
	l.mu.Unlock()
}

// LatencySummary is what reports show of a histogram, in microseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	P50   int64   `json:"p50_us"`
	P90   int64   `json:"p90_us"`
	P99   int64   `json:"p99_us"`
	P999  int64   `json:"p99_9_us"`
	Max   int64   `json:"max_us"`
	Mean  float64 `json:"mean_us"`
}

// Summary reads the percentiles.
func (l *Latency) Summary() LatencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LatencySummary{
		Count: l.h.TotalCount(),
		P50:   l.h.ValueAtQuantile(50),
		P90:   l.h.ValueAtQuantile(90),
		P99:   l.h.ValueAtQuantile(99),
		P999:  l.h.ValueAtQuantile(99.9),
		Max:   l.h.Max(),
		Mean:  l.h.Mean(),
	}
}

// micros formats microseconds for a table: 850µs, 12.3ms, 1.25s.
func micros(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		return fmt.Sprintf("%.3gms", float64(us)/1000)
	}
	return fmt.Sprintf("%.3gs", float64(us)/1e6)
}

// Bucket counts one second of one series group.
type Bucket struct {
	OK      int `json:"ok"`
	Refused int `json:"refused"`
	Aborted int `json:"aborted,omitempty"`
	Failed  int `json:"failed"`
}

// Series is one group's seconds and, for a plan, its limit lines: the
// plan's steady rate per second, and the cumulative allowance at the end
// of each second (subjects × (burst + rate × t)).
type Series struct {
	Group   string         `json:"group"`
	Buckets []Bucket       `json:"per_second"`
	Latency []LatencyPoint `json:"latency_per_second"`
	Limit   []float64      `json:"limit_per_second,omitempty"`
	Allowed []float64      `json:"allowed_cumulative,omitempty"`
}

// LatencyPoint is one second's answered calls' latency, in microseconds
// (Count 0: none answered).
type LatencyPoint struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50_us"`
	P99   int64 `json:"p99_us"`
	Max   int64 `json:"max_us"`
}

// sketch is one second's latencies in 40 buckets of ×1.4 from 50µs (to
// 35s): a few hundred bytes a second however many calls, so a day's run
// stays small; a percentile reads as its bucket's upper bound (at most
// 40% high), the maximum as it was.
type sketch struct {
	counts [40]uint32
	n      int
	max    int64
}

const (
	sketchBase   = 50.0
	sketchFactor = 1.4
)

func (s *sketch) add(us int64) {
	i := 0
	if us > sketchBase {
		i = min(int(math.Log(float64(us)/sketchBase)/math.Log(sketchFactor))+1, len(s.counts)-1)
	}
	s.counts[i]++
	s.n++
	s.max = max(s.max, us)
}

// quantile is the upper bound of the bucket holding quantile q, at most
// the maximum.
func (s *sketch) quantile(q float64) int64 {
	rank := int(math.Ceil(q * float64(s.n)))
	seen := 0
	for i, c := range s.counts {
		seen += int(c)
		if seen >= rank {
			return min(int64(sketchBase*math.Pow(sketchFactor, float64(i))), s.max)
		}
	}
	return s.max
}

// Timeline counts outcomes, and the latency of answered calls, per second
// since start, per group (a plan, a target, an edge replica).
type Timeline struct {
	start time.Time
	mu    sync.Mutex
	order []string
	by    map[string][]Bucket
	lat   map[string][]sketch
}

func newTimeline(start time.Time) *Timeline {
	return &Timeline{start: start, by: map[string][]Bucket{}, lat: map[string][]sketch{}}
}

// Add counts an outcome of a call sent at at that took took; the latency
// of an answer (admitted or refused) counts too.
func (t *Timeline) Add(group string, at time.Time, o Outcome, took time.Duration) {
	sec := max(int(at.Sub(t.start)/time.Second), 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.by[group]
	if !ok && !slices.Contains(t.order, group) {
		t.order = append(t.order, group)
	}
	for len(b) <= sec {
		b = append(b, Bucket{})
	}
	if o == OK || o == Refused {
		l := t.lat[group]
		for len(l) <= sec {
			l = append(l, sketch{})
		}
		l[sec].add(max(took.Microseconds(), 1))
		t.lat[group] = l
	}
	switch o {
	case OK:
		b[sec].OK++
	case Refused:
		b[sec].Refused++
	case Aborted:
		b[sec].Aborted++
	case Failed:
		b[sec].Failed++
	}
	t.by[group] = b
}

// Declare lists groups in the order charts show them, before any call.
func (t *Timeline) Declare(groups ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range groups {
		if _, ok := t.by[g]; !ok {
			t.order = append(t.order, g)
			t.by[g] = nil
		}
	}
}

// Series returns every group, in seconds seconds: calls sent a moment
// after the last second count in it.
func (t *Timeline) Series(seconds int) []Series {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Series, 0, len(t.order))
	for _, g := range t.order {
		b := append([]Bucket(nil), t.by[g]...)
		for len(b) < seconds {
			b = append(b, Bucket{})
		}
		l := append([]sketch(nil), t.lat[g]...)
		for len(l) < len(b) {
			l = append(l, sketch{})
		}
		for seconds > 0 && len(b) > seconds {
			last, lastLat := b[len(b)-1], l[len(l)-1]
			b, l = b[:len(b)-1], l[:len(l)-1]
			b[len(b)-1].OK += last.OK
			b[len(b)-1].Refused += last.Refused
			b[len(b)-1].Aborted += last.Aborted
			b[len(b)-1].Failed += last.Failed
			into := &l[len(l)-1]
			for i, c := range lastLat.counts {
				into.counts[i] += c
			}
			into.n += lastLat.n
			into.max = max(into.max, lastLat.max)
		}
		points := make([]LatencyPoint, len(l))
		for i, s := range l {
			if s.n > 0 {
				points[i] = LatencyPoint{Count: s.n, P50: s.quantile(0.5), P99: s.quantile(0.99), Max: s.max}
			}
		}
		out = append(out, Series{Group: g, Buckets: b, Latency: points})
	}
	return out
}

// progress writes a progress line to w about once a second until done is
// closed: elapsed, the share of the duration done and the time left, sent,
// ok, refused, errors and the rate of the last second, and a warning when
// the rate so far falls under 95% of target (calls per second the schedule plans; 0:
// none, a closed model or a scenario of its own pace). On a terminal it
// rewrites one line; elsewhere it writes a line each time.
func progress(done <-chan struct{}, w io.Writer, m *Meter, start time.Time, total time.Duration, target float64) {
	if w == nil {
		return
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, lastAt := int64(0), start
	line := func(now time.Time, final bool) {
		sent := m.sent.Load()
		rate := float64(sent-last) / max(now.Sub(lastAt).Seconds(), 0.001)
		last, lastAt = sent, now
		elapsed := max(now.Sub(start), 0)
		if final {
			// The last interval is cut short by the end of the schedule
			// (and drawn out by the calls' drain): the whole run's rate
			// says more.
			rate = float64(sent) / max(min(elapsed, total).Seconds(), 0.001)
		}
		s := progressLine(elapsed, total, sent, m.ok.Load(), m.refused.Load(), m.failed.Load(), m.aborted.Load(), rate, target)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", s)
		} else {
			fmt.Fprintln(w, s)
		}
	}
	for {
		select {
		case <-done:
			line(time.Now(), true)
			if tty {
				fmt.Fprintln(w)
			}
			return
		case now := <-t.C:
			line(now, false)
		}
	}
}

// progressLine is one line of progress; see progress.
func progressLine(elapsed, total time.Duration, sent, ok, refused, failed, aborted int64, rate, target float64) string {
	elapsed = min(elapsed, total)
	pct := 100 * elapsed.Seconds() / total.Seconds()
	s := fmt.Sprintf("%5s/%s %3.0f%% ETA %-5s sent %d  ok %d  refused %d  errors %d  rate %.0f/s",
		elapsed.Round(time.Second), total, pct, (total - elapsed).Round(time.Second), sent, ok, refused, failed, rate)
	if aborted > 0 {
		s += fmt.Sprintf("  (aborted %d)", aborted)
	}
	// Judged on the calls sent so far, not the last second's, which a
	// low rate's whole calls make jumpy (16 in a second of a planned 18/s).
	if achieved := float64(sent) / elapsed.Seconds(); target > 0 && elapsed >= time.Second && achieved < 0.95*target {
		s += fmt.Sprintf("  WARNING: %.0f/s sent of %.0f/s planned: the client cannot keep up", achieved, target)
	}
	return s
}
