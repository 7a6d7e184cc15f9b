package admin

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orgedge/edge/edge/ratelimit"
)

// The page's rates come from the edge's own metrics, read from the
// registry when the page asks (at most every sampleEvery) and kept for
// sampleSpan: nothing is added to a call's path, and nothing runs while no
// page is open. So the page shows what Prometheus would, over the last
// minutes it has been open (at most sampleSpan).
const (
	sampleEvery = 2 * time.Second
	sampleSpan  = 5 * time.Minute
	// recentSpan is what "now" means: rates over about the last 10 s.
	recentSpan = 10 * time.Second
	maxSamples = int(sampleSpan/sampleEvery) + 2
)

// sample is what the page derives its rates from: the metrics' counters
// and histograms at one instant.
type sample struct {
	at         time.Time
	outcomes   map[string]float64    // edge_request_duration_seconds' count by outcome
	decisions  map[decision]float64  // edge_limit_decisions_total, refused and shadow_refused
	backends   map[string]*backendAt // by address
	redis      histogram             // edge_redis_duration_seconds, every op
	redisStats ratelimit.Stats
	// Gauges: edge_open_streams (summed), edge_inflight_requests, edge_calls_held.
	streams, inflight, held float64
}

type decision struct{ Plan, Limit, Outcome string }

type backendAt struct {
	calls    map[string]float64 // edge_backend_calls_total by result
	duration histogram
}

// histogram is a cumulative histogram: counts of observations at most each
// upper bound.
type histogram struct {
	upper []float64
	cum   []float64
	count float64
}

func (h *histogram) add(m *dto.Histogram) {
	if h.upper == nil {
		for _, b := range m.GetBucket() {
			h.upper = append(h.upper, b.GetUpperBound())
		}
		h.cum = make([]float64, len(h.upper))
	}
	for i, b := range m.GetBucket() {
		if i < len(h.cum) && b.GetUpperBound() == h.upper[i] {
			h.cum[i] += float64(b.GetCumulativeCount())
		}
	}
	h.count += float64(m.GetSampleCount())
}

// since is h less an earlier h0 of the same series: the observations
// between the two.
func (h histogram) since(h0 histogram) histogram {
	d := histogram{upper: h.upper, cum: make([]float64, len(h.cum)), count: h.count - h0.count}
	for i := range h.cum {
		d.cum[i] = h.cum[i]
		if i < len(h0.cum) {
			d.cum[i] -= h0.cum[i]
		}
	}
	return d
}

// quantile estimates the q-quantile, in seconds, as Prometheus'
// histogram_quantile does (linear within a bucket); NaN without
// observations.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.upper) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	i := sort.Search(len(h.cum), func(i int) bool { return h.cum[i] >= rank })
	if i == len(h.cum) {
		return h.upper[len(h.upper)-1] // in the +Inf bucket: at least the last bound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.upper[i-1], h.cum[i-1]
	}
	inBucket := h.cum[i] - below
	if inBucket <= 0 {
		return h.upper[i]
	}
	return lower + (h.upper[i]-lower)*(rank-below)/inBucket
}

// samples are the page's ring of samples, oldest first.
type samples struct {
	g     prometheus.Gatherer
	rates *ratelimit.Limiter
	now   func() time.Time

	mu   sync.Mutex
	ring []*sample
}

// window returns the newest sample (taken now if the last is older than
// sampleEvery) and those to compare it with: recent, about recentSpan
// before it, and oldest, up to sampleSpan before it. Either is nil when no
// earlier sample is kept.
func (s *samples) window() (newest, recent, oldest *sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if n := len(s.ring); n == 0 || now.Sub(s.ring[n-1].at) >= sampleEvery {
		s.ring = append(s.ring, s.take(now))
	}
	drop := 0
	for drop < len(s.ring)-1 && (now.Sub(s.ring[drop].at) > sampleSpan || len(s.ring)-drop > maxSamples) {
		drop++
	}
	s.ring = append(s.ring[:0], s.ring[drop:]...)
	newest = s.ring[len(s.ring)-1]
	if len(s.ring) > 1 {
		oldest = s.ring[0]
		recent = s.ring[len(s.ring)-2]
		for i := len(s.ring) - 2; i >= 0; i-- {
			recent = s.ring[i]
			if newest.at.Sub(recent.at) >= recentSpan {
				break
			}
		}
	}
	return newest, recent, oldest
}

// take reads the metrics the page shows.
func (s *samples) take(now time.Time) *sample {
	sm := &sample{at: now, outcomes: map[string]float64{}, decisions: map[decision]float64{}, backends: map[string]*backendAt{}}
	if s.rates != nil {
		sm.redisStats = s.rates.Stats()
	}
	if s.g == nil {
		return sm
	}
	families, _ := s.g.Gather() // a family that failed is left out: the page shows less
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			switch f.GetName() {
			case "edge_request_duration_seconds":
				sm.outcomes[l["outcome"]] += float64(m.GetHistogram().GetSampleCount())
			case "edge_limit_decisions_total":
				if o := l["outcome"]; o != "allowed" {
					sm.decisions[decision{l["plan"], l["limit"], o}] += m.GetCounter().GetValue()
				}
			case "edge_backend_calls_total":
				sm.backend(l["backend"]).calls[l["result"]] += m.GetCounter().GetValue()
			case "edge_backend_duration_seconds":
				sm.backend(l["backend"]).duration.add(m.GetHistogram())
			case "edge_redis_duration_seconds":
				sm.redis.add(m.GetHistogram())
			case "edge_open_streams":
				sm.streams += m.GetGauge().GetValue()
			case "edge_inflight_requests":
				sm.inflight = m.GetGauge().GetValue()
			case "edge_calls_held":
				sm.held = m.GetGauge().GetValue()
			}
		}
	}
	return sm
}

func (sm *sample) backend(addr string) *backendAt {
	b := sm.backends[addr]
	if b == nil {
		b = &backendAt{calls: map[string]float64{}}
		sm.backends[addr] = b
	}
	return b
}

func labelsOf(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}
