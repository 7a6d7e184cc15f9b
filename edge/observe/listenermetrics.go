package observe

import "github.com/prometheus/client_golang/prometheus"

// ListenerMetrics are the counters of what the edge does to its clients
// outside any one call (connections refused or closed, HTTP/2 errors,
// early calls held, shared client addresses, log lines dropped), handed
// to the steps that do it as plain functions: no step imports Prometheus.
type ListenerMetrics struct {
	connsClosed, h2Errors *prometheus.CounterVec
	held, shared          prometheus.Counter
}

// NewListenerMetrics registers the counters on reg. held reads the calls
// held now (edge_calls_held) and dropped the log lines dropped, at each
// scrape.
func NewListenerMetrics(reg prometheus.Registerer, held func() int, dropped func() uint64) *ListenerMetrics {
	m := &ListenerMetrics{
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_connections_closed_total",
			Help: "API connections the edge closed for a bound: per_address (refused at accept, listen.max_connections_per_address), resets (HTTP/2 GOAWAY, listen.max_resets_per_connection).",
		}, []string{"reason"}),
		h2Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_http2_errors_total",
			Help: "HTTP/2 protocol errors of API clients, by Go's name for them.",
		}, []string{"type"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_early_calls_held_total",
			Help: "Calls held until the retry time a refusal of the same limit told their subject (Retry-After), after listen.max_early_calls early calls in a row.",
		}),
		shared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_client_addresses_shared_total",
			Help: "Client addresses from which tokens of listen.client_address.warn_subjects_per_address subjects came: usually a proxy in front that listen.client_address does not name.",
		}),
	}
	reg.MustRegister(m.connsClosed, m.h2Errors, m.held, m.shared,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edge_calls_held",
			Help: "Calls held now until the retry time a refusal of the same limit told their subject (listen.max_early_calls).",
		}, func() float64 { return float64(held()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_log_lines_dropped_total",
			Help: "Log lines dropped because stderr could not keep up (see log.buffer_bytes).",
		}, func() float64 { return float64(dropped()) }))
	return m
}

// RefusedAtAccept counts a connection refused at accept for its address.
func (m *ListenerMetrics) RefusedAtAccept() { m.connsClosed.WithLabelValues("per_address").Inc() }

// ClosedForResets counts an HTTP/2 connection closed for its resets.
func (m *ListenerMetrics) ClosedForResets() { m.connsClosed.WithLabelValues("resets").Inc() }

// HTTP2Error counts an HTTP/2 protocol error by Go's name for it.
func (m *ListenerMetrics) HTTP2Error(name string) { m.h2Errors.WithLabelValues(name).Inc() }

// Held counts a call held for its subject's early calls.
func (m *ListenerMetrics) Held() { m.held.Inc() }

// SharedAddress counts a client address that carries many subjects.
func (m *ListenerMetrics) SharedAddress() { m.shared.Inc() }
