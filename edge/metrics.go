package edge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/classify"
)

// Metrics are the edge's Prometheus metrics. Labels are bounded: services
// and methods of the API (or "unknown"), protocols, codes; never a subject.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Buckets fine enough to see sub-millisecond overhead, coarse enough for streams.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}

// NewMetrics registers the edge's metrics with reg.
func NewMetrics(reg prometheus.Registerer, auth *authn.Authenticator, version string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_requests_total",
			Help: "Calls answered by the edge, by service, method, protocol and result code.",
		}, []string{"service", "method", "protocol", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "edge_request_duration_seconds",
			Help:                        "Time from receiving a call to its last byte, by service, method and protocol.",
			Buckets:                     durationBuckets,
			NativeHistogramBucketFactor: 1.1,
		}, []string{"service", "method", "protocol"}),
	}
	reg.MustRegister(m.requests, m.duration,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_token_cache_hits_total",
			Help: "Calls whose bearer token was found verified in the cache.",
		}, func() float64 { h, _ := auth.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_token_verifications_total",
			Help: "Bearer tokens verified by signature (cache misses).",
		}, func() float64 { _, v := auth.Stats(); return float64(v) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "edge_build_info",
			Help:        "Always 1; the version label names the build.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return m
}

func (m *Metrics) observe(c classify.Call, code string, d time.Duration) {
	if m == nil {
		return
	}
	service, method := c.Service, c.Method
	if service == "" {
		service, method = "unknown", "unknown"
	}
	protocol := string(c.Protocol)
	if protocol == "" {
		protocol = "unknown"
	}
	m.requests.WithLabelValues(service, method, protocol, code).Inc()
	m.duration.WithLabelValues(service, method, protocol).Observe(d.Seconds())
}
