package orgsvc

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the backend's Prometheus metrics. Labels are bounded: the
// API's services and methods, codes and storage operations; never a caller
// or an organization.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	storage  *prometheus.HistogramVec
}

var (
	// requestBuckets are the edge's: fine below a millisecond, coarse
	// enough for streams.
	requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}
	storageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// NewMetrics registers the backend's metrics with reg: requests and their
// duration by service and method, storage calls by operation, and the
// build's version. The caller registers Go and process collectors if it
// wants them.
func NewMetrics(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orgsvc_requests_total",
			Help: "Calls answered by the backend, by service, method and result code.",
		}, []string{"service", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "orgsvc_request_duration_seconds",
			Help:                        "Time the backend took to answer a call (a stream: until it ended), by service and method.",
			Buckets:                     requestBuckets,
			NativeHistogramBucketFactor: 1.1,
		}, []string{"service", "method"}),
		storage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orgsvc_storage_duration_seconds",
			Help:    "Storage calls by operation (the store method, e.g. GetOrganization), failed ones included.",
			Buckets: storageBuckets,
		}, []string{"operation"}),
	}
	reg.MustRegister(m.requests, m.duration, m.storage,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "orgsvc_build_info",
			Help:        "Always 1; the version label names the build.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }))
	return m
}

func (m *Metrics) observe(procedure string, err error, d time.Duration) {
	if m == nil {
		return
	}
	service, method, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.requests.WithLabelValues(service, method, code).Inc()
	m.duration.WithLabelValues(service, method).Observe(d.Seconds())
}

func (m *Metrics) stored(operation string, d time.Duration) {
	if m != nil {
		m.storage.WithLabelValues(operation).Observe(d.Seconds())
	}
}

// metricsInterceptor counts and times every call a handler answers. Only
// the API's procedures reach it, so its labels stay bounded.
type metricsInterceptor struct{ m *Metrics }

func (i metricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		i.m.observe(req.Spec().Procedure, err, time.Since(start))
		return res, err
	}
}

func (i metricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i metricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		i.m.observe(conn.Spec().Procedure, err, time.Since(start))
		return err
	}
}
