package observe

import "github.com/prometheus/client_golang/prometheus"

// LeaseRenewals counts the renewals of concurrent-stream leases (a
// quota.RenewalObserver): over a while, their sum is the open leases times
// the renewal rounds (one each third of limits.stream_lease), so a renewal
// missed shows as fewer.
type LeaseRenewals struct {
	renewals *prometheus.CounterVec
	rounds   prometheus.Counter
}

// Outcomes of a lease renewal (the outcome label).
const (
	leaseRenewed = "renewed" // the lease was alive and lives a period more
	leaseLost    = "lost"    // it had expired before renewal: put back, counted again
	leaseFailed  = "failed"  // Redis did not answer: the stream stays open
)

// NewLeaseRenewals registers the lease renewal metrics on reg.
func NewLeaseRenewals(reg prometheus.Registerer) *LeaseRenewals {
	m := &LeaseRenewals{
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_stream_lease_renewals_total",
			Help: "Concurrent-stream lease renewals by outcome: renewed, lost (had expired before renewal; put back and counted again), failed (Redis did not answer; the stream stays open).",
		}, []string{"outcome"}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_stream_lease_renewal_rounds_total",
			Help: "Renewal rounds of this replica's stream leases: each renews every open lease in one pipeline (one round trip per Redis node).",
		}),
	}
	for _, o := range []string{leaseRenewed, leaseLost, leaseFailed} {
		m.renewals.WithLabelValues(o)
	}
	reg.MustRegister(m.renewals, m.rounds)
	return m
}

// LeaseRenewals counts one renewal round.
func (m *LeaseRenewals) LeaseRenewals(renewed, lost, failed int) {
	m.rounds.Inc()
	m.renewals.WithLabelValues(leaseRenewed).Add(float64(renewed))
	m.renewals.WithLabelValues(leaseLost).Add(float64(lost))
	m.renewals.WithLabelValues(leaseFailed).Add(float64(failed))
}
