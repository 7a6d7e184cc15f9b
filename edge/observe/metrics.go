package observe

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/wire"
)

// Metrics are the edge's Prometheus metrics. Labels are bounded: services
// and methods of the API (or "unknown"), protocols, codes; never a subject.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	overheads    *prometheus.HistogramVec
	unavailables *prometheus.CounterVec
	deadlines    *prometheus.CounterVec
	decisions    *prometheus.CounterVec
	idem         *prometheus.CounterVec
	upstream     *prometheus.HistogramVec
	reservations *prometheus.CounterVec
	openStreams  *prometheus.GaugeVec
	leases       prometheus.Gauge
	inflight     prometheus.Gauge
	quota        *quotaMetrics
	canceled     canceledLines
	backends     *backendMetrics

	// Children looked up once per label set and kept: the hot path reads a
	// map instead of hashing label values into the vector on every call.
	calls    children[seriesKey, *series]
	decision children[decisionKey, prometheus.Counter]
}

// seriesKey names a call's service, method and protocol labels.
type seriesKey struct{ service, method, protocol string }

// series are the children of one (service, method, protocol), each made at
// its first use so that a series appears only once something happened.
type series struct {
	duration           [len(outcomes)]lazyChild[prometheus.Observer] // by outcome
	upstream, overhead lazyChild[prometheus.Observer]
	codes              [len(grpcCodes)]lazyChild[prometheus.Counter] // by gRPC code number
}

// lazyChild is a vector's child, looked up at its first use and kept.
type lazyChild[T any] struct {
	v    atomic.Pointer[T]
	make func() T
}

func (l *lazyChild[T]) get() T {
	if p := l.v.Load(); p != nil {
		return *p
	}
	v := l.make() // a race makes it twice: the vector returns the same child
	l.v.Store(&v)
	return v
}

type decisionKey struct {
	plan, limit string
	allowed     bool
}

// children caches a vector's children by label values. Labels are bounded,
// so the cache is too: it holds what the vector holds.
type children[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]V
	make func(K) V
}

func (c *children[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = make(map[K]V)
	}
	v = c.make(k)
	c.m[k] = v
	return v
}

// Buckets fine enough to see sub-millisecond overhead, coarse enough for streams.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}

// NewMetrics registers the edge's metrics with reg.
func NewMetrics(reg prometheus.Registerer, auth *authn.Authenticator, rates *ratelimit.Limiter, version string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_requests_total",
			Help: "Calls answered by the edge, by service, method, protocol and result code.",
		}, []string{"service", "method", "protocol", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "edge_request_duration_seconds",
			Help:                        "Time from receiving a call to its last byte, by service, method, protocol and outcome (forwarded, refused, replayed, error).",
			Buckets:                     durationBuckets,
			NativeHistogramBucketFactor: 1.1,
		}, []string{"service", "method", "protocol", "outcome"}),
		overheads: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "edge_overhead_seconds",
			Help:                        "The edge's own time in a forwarded call: before the backend was called plus after its answer (the call's duration less the backend's), by service, method and protocol.",
			Buckets:                     overheadBuckets,
			NativeHistogramBucketFactor: 1.1,
		}, []string{"service", "method", "protocol"}),
		unavailables: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_unavailable_total",
			Help: "Calls answered unavailable, by the dependency at fault: limits (Redis for limits), idempotency (Redis for Idempotency-Key), issuer (the OIDC issuer), upstream (the backend), overload (the edge itself, past listen.max_calls_in_flight).",
		}, []string{"reason"}),
	}
	for _, r := range call.UnavailableReasons {
		m.unavailables.WithLabelValues(r)
	}
	m.deadlines = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_deadline_exceeded_total",
		Help: "Calls that ended deadline_exceeded, by where: backend (the deadline, the client's or the edge's cap, ran out while the backend held the call: the service's failure), client (a deadline the client chose, shorter than the edge's cap, ran out before the call reached the backend: not a server error) or edge (the edge's cap ran out before that).",
	}, []string{"origin"})
	m.deadlines.WithLabelValues(call.DeadlineByClient)
	m.deadlines.WithLabelValues(call.DeadlineByEdge)
	m.deadlines.WithLabelValues(call.DeadlineInBackend)
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_limit_decisions_total",
		Help: "Limit decisions by plan, the limit that decided (plan, daily, op:<Method>, streams, quota kinds) and outcome (allowed, refused, shadow_refused: a shadow limit would have refused, the call was admitted).",
	}, []string{"plan", "limit", "outcome"})
	m.idem = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_idempotency_total",
		Help: "Calls with Idempotency-Key by outcome: first, replayed, in_use, reused, not_stored, too_large, invalid, keys_exhausted, unavailable.",
	}, []string{"outcome"})
	m.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                        "edge_upstream_duration_seconds",
		Help:                        "Time from forwarding a call to the backend to the backend's last byte (or its failure), by service, method and protocol.",
		Buckets:                     durationBuckets,
		NativeHistogramBucketFactor: 1.1,
	}, []string{"service", "method", "protocol"})
	m.reservations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_quota_reservations_total",
		Help: "Environment quota reservations by outcome: reserved, confirmed, rolled_back, released (DeleteEnvironment), refused.",
	}, []string{"outcome"})
	for _, o := range limits.Reservations {
		m.reservations.WithLabelValues(o)
	}
	m.openStreams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "edge_open_streams",
		Help: "Streaming calls open at this replica, by service and method.",
	}, []string{"service", "method"})
	m.leases = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edge_stream_leases_held",
		Help: "Concurrent-stream leases this replica holds in Redis.",
	})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edge_inflight_requests",
		Help: "Calls this replica is serving now, streams included.",
	})
	m.calls.make = func(k seriesKey) *series {
		s := &series{}
		for i, outcome := range outcomes {
			s.duration[i].make = func() prometheus.Observer {
				return m.duration.WithLabelValues(k.service, k.method, k.protocol, outcome)
			}
		}
		s.overhead.make = func() prometheus.Observer { return m.overheads.WithLabelValues(k.service, k.method, k.protocol) }
		s.upstream.make = func() prometheus.Observer { return m.upstream.WithLabelValues(k.service, k.method, k.protocol) }
		for i, code := range grpcCodes {
			s.codes[i].make = func() prometheus.Counter { return m.requests.WithLabelValues(k.service, k.method, k.protocol, code) }
		}
		return s
	}
	m.decision.make = func(k decisionKey) prometheus.Counter {
		outcome := "refused"
		if k.allowed {
			outcome = "allowed"
		}
		return m.decisions.WithLabelValues(k.plan, k.limit, outcome)
	}
	reg.MustRegister(m.upstream, m.reservations, m.openStreams, m.leases, m.inflight)
	m.quota = newQuotaMetrics(reg)
	m.backends = newBackendMetrics(reg)
	reg.MustRegister(m.decisions, m.idem)
	registerBreakerMetrics(reg, rates)
	reg.MustRegister(m.overheads, m.unavailables, m.deadlines)
	m.canceled.sampledOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_access_lines_sampled_out_total",
		Help: "Access lines not written for calls canceled by their client, past log.canceled_per_second.",
	})
	reg.MustRegister(m.canceled.sampledOut)
	reg.MustRegister(m.requests, m.duration,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_token_cache_hits_total",
			Help: "Calls whose bearer token was found verified in the cache.",
		}, func() float64 { h, _ := auth.Stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_token_verifications_total",
			Help: "Bearer tokens verified by signature (cache misses).",
		}, func() float64 { _, v := auth.Stats(); return float64(v) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_token_refusals_remembered_total",
			Help: "Calls whose token was refused before and was refused again unverified.",
		}, func() float64 { r, _ := auth.FailureStats(); return float64(r) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_auth_failure_limited_total",
			Help: "Calls refused unverified because their client address failed to authenticate too often.",
		}, func() float64 { _, l := auth.FailureStats(); return float64(l) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_oidc_key_fetches_total",
			Help: "Fetches of the issuer's signing keys (JWKS), successful or not.",
		}, func() float64 { return float64(auth.KeyFetches()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "edge_build_info",
			Help:        "Always 1; the version label names the build.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return m
}

// labels are a call's service, method and protocol labels.
func labels(c wire.Call) (service, method, protocol string) {
	service, method = c.Service, c.Method
	if service == "" {
		service, method = "unknown", "unknown"
	}
	protocol = string(c.Protocol)
	if protocol == "" {
		protocol = "unknown"
	}
	return service, method, protocol
}

// Streaming makes edge_open_streams start at 0 for every streaming
// procedure, so that the series exist before the first stream.
func (m *Metrics) Streaming(procs wire.Procedures) {
	if m == nil {
		return
	}
	for name, streams := range procs {
		if !streams {
			continue
		}
		if service, method, ok := strings.Cut(strings.TrimPrefix(name, "/"), "/"); ok {
			m.openStreams.WithLabelValues(service, method)
		}
	}
}

func (m *Metrics) Observe(c wire.Call, code, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	s := m.seriesOf(c)
	s.duration[outcomeIndex(outcome)].get().Observe(d.Seconds())
	// Counted last (see ServeHTTP): tests wait for this counter.
	if i, ok := grpcCodeIndex[code]; ok {
		s.codes[i].get().Inc()
	} else {
		service, method, protocol := labels(c)
		m.requests.WithLabelValues(service, method, protocol, code).Inc()
	}
}

// outcomes are the values of the outcome label, by index.
var outcomes = call.Outcomes

func outcomeIndex(o string) int {
	for i, name := range outcomes {
		if name == o {
			return i
		}
	}
	return len(outcomes) - 1
}

// overheadBuckets resolve the edge's own share, from 50µs to 1s.
var overheadBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Overhead records the edge's own time in one forwarded call.
func (m *Metrics) Overhead(c wire.Call, d time.Duration) {
	if m != nil {
		m.seriesOf(c).overhead.get().Observe(max(d, 0).Seconds())
	}
}

// DeadlineExceeded counts one deadline_exceeded call by whose deadline it was.
func (m *Metrics) DeadlineExceeded(origin string) {
	if m != nil {
		m.deadlines.WithLabelValues(origin).Inc()
	}
}

// Unavailable counts one unavailable answer by the dependency at fault.
func (m *Metrics) Unavailable(reason string) {
	if m != nil {
		m.unavailables.WithLabelValues(reason).Inc()
	}
}

// seriesOf returns the call's children.
func (m *Metrics) seriesOf(c wire.Call) *series {
	service, method, protocol := labels(c)
	return m.calls.get(seriesKey{service, method, protocol})
}

// Forwarded records one call forwarded to the backend.
func (m *Metrics) Forwarded(c wire.Call, d time.Duration) {
	if m == nil {
		return
	}
	m.seriesOf(c).upstream.get().Observe(d.Seconds())
}

// StreamOpened counts a streaming call as open until the returned function
// is called.
func (m *Metrics) StreamOpened(c wire.Call) (closed func()) {
	if m == nil {
		return func() {}
	}
	g := m.openStreams.WithLabelValues(c.Service, c.Method)
	g.Inc()
	return g.Dec
}

// LeaseHeld adds delta (1 or -1) to the leases held.
func (m *Metrics) LeaseHeld(delta float64) {
	if m != nil {
		m.leases.Add(delta)
	}
}

// Reservation counts one environment quota event.
func (m *Metrics) Reservation(outcome string) {
	if m != nil {
		m.reservations.WithLabelValues(outcome).Inc()
	}
}

// Serving adds delta (1 or -1) to the calls in flight.
func (m *Metrics) Serving(delta float64) {
	if m != nil {
		m.inflight.Add(delta)
	}
}

// Decided counts one limit decision.
func (m *Metrics) Decided(plan, limit string, allowed bool) {
	if m == nil {
		return
	}
	m.decision.get(decisionKey{plan, limit, allowed}).Inc()
}

// ShadowRefused counts one call a shadow limit would have refused.
func (m *Metrics) ShadowRefused(plan, limit string) {
	if m != nil {
		m.decisions.WithLabelValues(plan, limit, limits.OutcomeShadowRefused).Inc()
	}
}

// Idempotency counts one keyed call's outcome ("" when the call had no key).
func (m *Metrics) Idempotency(o idempotency.Outcome) {
	if m == nil || o == "" {
		return
	}
	m.idem.WithLabelValues(string(o)).Inc()
}
