package observe

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// canceledLines bounds the access lines of calls their client canceled
// before the answer: a client that opens and resets streams in a loop
// (HTTP/2 rapid reset) would otherwise write a line per stream. Only the
// lines go; the calls are still counted in edge_requests_total.
type canceledLines struct {
	limit      *rate.Limiter // nil: every line is written
	sampledOut prometheus.Counter
}

// SampleCanceledLines writes at most perSecond access lines a second for
// calls whose code is canceled (a burst of as many), and counts the others
// in edge_access_lines_sampled_out_total. Call it before serving.
func (m *Metrics) SampleCanceledLines(perSecond int) {
	if m != nil {
		m.canceled.limit = rate.NewLimiter(rate.Limit(perSecond), perSecond)
	}
}

// KeepLine reports whether the access line of a call with this result
// code is written.
func (m *Metrics) KeepLine(code string) bool {
	if m == nil || code != "canceled" || m.canceled.limit == nil || m.canceled.limit.Allow() {
		return true
	}
	m.canceled.sampledOut.Inc()
	return false
}
