package observe

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/proxy"
)

// backendMetrics are the upstream pool's metrics per backend address. The
// addresses come from configuration or DNS, never from a client, and the
// series of a backend that leaves the pool are deleted, so their number is
// what the operator runs.
type backendMetrics struct {
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	ejections *prometheus.CounterVec
	healthy   *prometheus.GaugeVec
	ejected   *prometheus.GaugeVec
}

func newBackendMetrics(reg prometheus.Registerer) *backendMetrics {
	m := &backendMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_backend_calls_total",
			Help: "Calls sent to each backend, by result: answered (whatever the answer says), failed (the backend refused or broke the connection: its own failure), abandoned (the caller's deadline ran out or the caller left first: not the backend's failure).",
		}, []string{"backend", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "edge_backend_duration_seconds",
			Help:                        "Time from sending a call to a backend to its answer's headers (the whole answer over HTTP/1.1) or its failure, by backend.",
			Buckets:                     durationBuckets,
			NativeHistogramBucketFactor: 1.1,
		}, []string{"backend"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_backend_ejections_total",
			Help: "Ejections of each backend, by reason: refused (a connection), failures (three calls in a row), timeout (a call's deadline ran out in it and it then failed a health check).",
		}, []string{"backend", "reason"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edge_backend_healthy",
			Help: "1 while a backend passes its health checks (or none run), 0 while it fails them and gets no calls.",
		}, []string{"backend"}),
		ejected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edge_backend_ejected",
			Help: "1 while a backend is ejected (upstream.eject_for) and gets no calls, else 0.",
		}, []string{"backend"}),
	}
	reg.MustRegister(m.calls, m.duration, m.ejections, m.healthy, m.ejected)
	return m
}

// Backends returns the upstream pool's observer (nil without metrics).
func (m *Metrics) Backends() proxy.Observer {
	if m == nil {
		return nil
	}
	return m.backends
}

// Backend makes every series of addr exist at once, at 0 (a dashboard shows
// 0, not "no data"), and keeps its children for the calls.
func (m *backendMetrics) Backend(addr string) proxy.BackendObserver {
	b := &backendSeries{m: m, addr: addr, duration: m.duration.WithLabelValues(addr),
		healthy: m.healthy.WithLabelValues(addr), ejected: m.ejected.WithLabelValues(addr)}
	for i, r := range proxy.CallResults {
		b.calls[i] = m.calls.WithLabelValues(addr, r)
	}
	for _, r := range proxy.EjectionReasons {
		m.ejections.WithLabelValues(addr, r)
	}
	b.healthy.Set(1)
	b.ejected.Set(0)
	return b
}

// backendSeries are one backend's children.
type backendSeries struct {
	m        *backendMetrics
	addr     string
	calls    [3]prometheus.Counter // by proxy.CallResults
	duration prometheus.Observer
	healthy  prometheus.Gauge
	ejected  prometheus.Gauge
	// mu orders Forget after the state changes that a timer or a health
	// check may still report, so that none brings a series back.
	mu   sync.Mutex
	gone bool
}

func (b *backendSeries) Called(result string, d time.Duration) {
	for i, r := range proxy.CallResults {
		if r == result {
			b.calls[i].Inc()
		}
	}
	b.duration.Observe(d.Seconds())
}

func (b *backendSeries) Ejected(reason string) {
	b.state(func() {
		b.m.ejections.WithLabelValues(b.addr, reason).Inc()
		b.ejected.Set(1)
	})
}

func (b *backendSeries) EjectionOver() { b.state(func() { b.ejected.Set(0) }) }

func (b *backendSeries) Healthy(ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	b.state(func() { b.healthy.Set(v) })
}

func (b *backendSeries) state(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.gone {
		f()
	}
}

// Forget deletes the backend's series.
func (b *backendSeries) Forget() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = true
	for _, c := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{b.m.calls, b.m.duration, b.m.ejections, b.m.healthy, b.m.ejected} {
		c.DeletePartialMatch(prometheus.Labels{"backend": b.addr})
	}
}
