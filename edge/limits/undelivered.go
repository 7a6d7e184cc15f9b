package limits

import (
	"context"
	"time"
)

// Outcomes of a refund of an undelivered call (Observer.Refunded).
const (
	RefundRefunded = "refunded" // the day's and month's counts were given back
	RefundFailed   = "failed"   // Redis did not take it: the call stays counted
)

// Refunds lists the refund outcomes, for an observer to export each from
// the start.
var Refunds = []string{RefundRefunded, RefundFailed}

// refundTimeout bounds the wait for Redis's answer to a refund, on top of
// the limiter's own deadline per call.
const refundTimeout = time.Second

// Undelivered takes a call the edge could deliver to no backend (nothing
// of it was sent: every connection to a backend failed to open) out of its
// subject's usage of the day and the month, where admission counted it: a
// call no backend received is not charged, like a refused one, so that a
// client retrying through a backend outage does not spend its daily cap on
// it. The rates it consumed stay consumed (they pace the subject's calls,
// and a retry storm must still be slowed while the backends come back),
// and what else the call held (a stream lease, an environment
// reservation) goes back when the call ends (Done), as for any call the
// backend did not answer with success.
//
// It runs before the client has the whole answer, so a GetUsage after it
// never counts the call; one round trip to Redis, not bound to the
// client's context. A refund Redis does not take leaves the call counted
// and is counted in the observer's refunds, failed.
func (l *Step) Undelivered(ctx context.Context, a *Admission) {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	switch refunded, err := l.Rates.Refund(ctx, a.decision); {
	case err != nil:
		l.obs.Refunded(RefundFailed)
	case refunded:
		l.obs.Refunded(RefundRefunded)
	}
}
