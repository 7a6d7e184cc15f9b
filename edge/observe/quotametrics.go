package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/limits"
)

// quotaMetrics count what keeps the edge's records true to what the
// backend did: its environments, and the usage of calls it never received.
type quotaMetrics struct {
	unreadable *prometheus.CounterVec
	refunds    *prometheus.CounterVec
	passes     *prometheus.CounterVec
	reconciled prometheus.Counter
	adopted    prometheus.Counter
}

func newQuotaMetrics(reg prometheus.Registerer) *quotaMetrics {
	m := &quotaMetrics{
		unreadable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_quota_unreadable_answers_total",
			Help: "Successful CreateEnvironment or DeleteEnvironment answers the edge could not read (unknown compression, too large, malformed); their quota is left as it was until reconciliation. By method.",
		}, []string{"method"}),
		refunds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_usage_refunds_total",
			Help: "Calls no backend received (every connection refused: answered 503 UPSTREAM_UNAVAILABLE) taken back out of their subject's daily and monthly usage, by outcome: refunded, failed (Redis did not take it; the call stays counted).",
		}, []string{"outcome"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_quota_reconcile_passes_total",
			Help: "Reconciliation passes of the environment records with the backend, by outcome: ok, error, skipped (another replica's pass was recent).",
		}, []string{"outcome"}),
		reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_quota_reconciled_environments_total",
			Help: "Running environments that reconciliation found gone at the backend and released.",
		}),
		adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_quota_adopted_environments_total",
			Help: "Environments the backend holds that the edge had no record of (created while Redis was down or full, a lost confirmation, created around the edge), which reconciliation counted for the subject that created them.",
		}),
	}
	for _, o := range []string{"ok", "error", "skipped"} {
		m.passes.WithLabelValues(o)
	}
	for _, method := range []string{"CreateEnvironment", "DeleteEnvironment"} {
		m.unreadable.WithLabelValues(method)
	}
	for _, o := range limits.Refunds {
		m.refunds.WithLabelValues(o)
	}
	reg.MustRegister(m.unreadable, m.refunds, m.passes, m.reconciled, m.adopted)
	return m
}

// UnreadableAnswer counts a successful answer the edge could not read.
func (m *Metrics) UnreadableAnswer(method string) {
	if m != nil && m.quota != nil {
		m.quota.unreadable.WithLabelValues(method).Inc()
	}
}

// Reconciled counts a pass and the environments it released and adopted.
func (m *Metrics) Reconciled(outcome string, ended, adopted int) {
	if m != nil && m.quota != nil {
		m.quota.passes.WithLabelValues(outcome).Inc()
		m.quota.reconciled.Add(float64(ended))
		m.quota.adopted.Add(float64(adopted))
	}
}

// Refunded counts the refund of a call no backend received.
func (m *Metrics) Refunded(outcome string) {
	if m != nil && m.quota != nil {
		m.quota.refunds.WithLabelValues(outcome).Inc()
	}
}
