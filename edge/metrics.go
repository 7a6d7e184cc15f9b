package edge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/ratelimit"
)

// Metrics are the edge's Prometheus metrics. Labels are bounded: services
// and methods of the API (or "unknown"), protocols, codes; never a subject.
type Metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	idem      *prometheus.CounterVec
}

// Buckets fine enough to see sub-millisecond overhead, coarse enough for streams.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}

// NewMetrics registers the edge's metrics with reg.
func NewMetrics(reg prometheus.Registerer, auth *authn.Authenticator, limits *Limits, version string) *Metrics {
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
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_limit_decisions_total",
		Help: "Limit decisions by plan, the limit that decided (plan, daily, op:<Method>, streams, quota kinds) and outcome (allowed, refused).",
	}, []string{"plan", "limit", "outcome"})
	stats := func(f func(s ratelimit.Stats) float64) func() float64 {
		return func() float64 { return f(limits.Rates.Stats()) }
	}
	m.idem = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_idempotency_total",
		Help: "Calls with Idempotency-Key by outcome: first, replayed, in_use, reused, not_stored, too_large, invalid, unavailable.",
	}, []string{"outcome"})
	reg.MustRegister(m.decisions, m.idem,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_redis_breaker_state",
			Help: "The limiter's circuit breaker in front of Redis: 0 closed, 1 open, 2 half-open.",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.Breaker) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_fail_open_active",
			Help: "1 while Redis is unreachable and this replica enforces its local share of every limit (fail_open).",
		}, stats(func(s ratelimit.Stats) float64 {
			if s.FailOpen {
				return 1
			}
			return 0
		})),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_redis_calls_total",
			Help: "Calls the limiter made to Redis.",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.RedisCalls) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_redis_errors_total",
			Help: "Limiter calls to Redis that failed or passed their deadline.",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.RedisErrors) })),
	)
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

// decided counts one limit decision.
func (m *Metrics) decided(plan, limit string, allowed bool) {
	if m == nil {
		return
	}
	outcome := "refused"
	if allowed {
		outcome = "allowed"
	}
	m.decisions.WithLabelValues(plan, limit, outcome).Inc()
}

// idempotency counts one keyed call's outcome ("" when the call had no key).
func (m *Metrics) idempotency(o idempotency.Outcome) {
	if m == nil || o == "" {
		return
	}
	m.idem.WithLabelValues(string(o)).Inc()
}
