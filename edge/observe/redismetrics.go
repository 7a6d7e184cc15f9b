package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/ratelimit"
)

// breakerStates are the values of edge_redis_breaker_state's state label.
var breakerStates = []struct {
	label string
	state ratelimit.BreakerState
}{
	{"closed", ratelimit.BreakerClosed},
	{"open", ratelimit.BreakerOpen},
	{"half_open", ratelimit.BreakerHalfOpen},
}

// registerBreakerMetrics exports what the limiter's circuit breaker knows,
// read from its Stats at each scrape: its state (one series per state, so
// that no query mistakes half-open for open), how often it opened, and the
// calls decided without Redis.
func registerBreakerMetrics(reg prometheus.Registerer, rates *ratelimit.Limiter) {
	stats := func(f func(s ratelimit.Stats) float64) func() float64 {
		return func() float64 { return f(rates.Stats()) }
	}
	for _, bs := range breakerStates {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "edge_redis_breaker_state",
			Help:        "The limiter's circuit breaker in front of Redis: 1 for its current state (closed, open, half_open), 0 for the others.",
			ConstLabels: prometheus.Labels{"state": bs.label},
		}, stats(func(s ratelimit.Stats) float64 {
			if s.Breaker == bs.state {
				return 1
			}
			return 0
		})))
	}
	decidedLocally := func(outcome string, f func(s ratelimit.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "edge_fail_open_decisions_total",
			Help:        "Calls the limiter decided on this replica's local share while Redis was unreachable (fail_open), by outcome: allowed, refused.",
			ConstLabels: prometheus.Labels{"outcome": outcome},
		}, stats(func(s ratelimit.Stats) float64 { return float64(f(s)) }))
	}
	reg.MustRegister(
		decidedLocally("allowed", func(s ratelimit.Stats) uint64 { return s.AllowedFailOpen }),
		decidedLocally("refused", func(s ratelimit.Stats) uint64 { return s.RefusedFailOpen }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_limits_unavailable_total",
			Help: "Calls refused as unavailable because Redis was unreachable under limits.on_redis_failure: fail_closed.",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.Unavailable) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edge_redis_breaker_opens_total",
			Help: "Times the limiter's circuit breaker opened: Redis failed the limiter's calls several times in a row.",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.BreakerOpens) })),
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
			Help: "Calls the limiter made to Redis (not those its open breaker kept from Redis).",
		}, stats(func(s ratelimit.Stats) float64 { return float64(s.RedisCalls) })),
	)
}
