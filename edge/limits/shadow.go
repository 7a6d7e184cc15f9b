package limits

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/identity"
)

// OutcomeShadowRefused is the outcome of edge_limit_decisions_total for a
// call that a shadow limit refused and the edge admitted.
const OutcomeShadowRefused = "shadow_refused"

// shadowed handles a rate decision d that refused req while some of its
// limits are in shadow mode. A refused request consumes nothing, so the
// limits that are enforced have not counted this call yet: they decide
// again alone, and consume it if they admit it. When they admit, every limit
// that refused was a shadow one: the call is admitted, counted as
// shadow_refused under the limit that refused it, and its subject logged.
// The shadow limits themselves consume nothing for a call they refuse, just
// as they would if they were enforced, so that they go on refusing exactly
// the calls enforcing would refuse.
func (l *Step) shadowed(ctx context.Context, req ratelimit.Request, d ratelimit.Decision, planName string, plan config.Plan, rule *policy.Rule, p *identity.Principal) (ratelimit.Decision, bool, error) {
	enforced := req
	enforced.Limits = slices.DeleteFunc(slices.Clone(req.Limits), func(lim ratelimit.Limit) bool {
		if lim.Name == policy.PlanLimit {
			return plan.Shadow
		}
		return rule.Shadow
	})
	if plan.Shadow {
		enforced.Daily = 0 // the day is still counted, for usage
	}
	d2, err := l.Rates.Allow(ctx, enforced)
	if err != nil || !d2.Allowed {
		return d2, false, err
	}
	l.shadowRefused(ctx, planName, d.Refused, p)
	return d2, true, nil
}

// shadowRefused counts and logs a call that the shadow limit named limit
// would have refused.
func (l *Step) shadowRefused(ctx context.Context, plan, limit string, p *identity.Principal) {
	l.obs.ShadowRefused(plan, limit)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrLimitsOutcome.String(OutcomeShadowRefused), attrLimit.String(limit))
	}
	if l.shadows.first(p.Subject+"\x00"+limit, l.now()) {
		l.log.LogAttrs(ctx, slog.LevelInfo, "shadow limit would refuse",
			slog.String("limit", limit), slog.String("plan", plan),
			slog.String("subject", identity.SubjectHash(p.Subject)), slog.String("client_id", p.ClientID),
			slog.Duration("log_interval", shadowLogInterval))
	}
}

// shadowLogInterval is the least time between two log lines about one
// subject and shadow limit: a client far over a new limit would otherwise
// write a line per call.
const shadowLogInterval = time.Minute

// shadowLog remembers when each (subject, limit) was last logged.
type shadowLog struct {
	once    sync.Once
	seen    *lru.Cache[string, time.Time]
	evicted atomic.Uint64
}

// maxShadowLogged bounds the (subject, limit) pairs shadowLog remembers.
const maxShadowLogged = 10_000

// stats returns the pairs remembered and those forgotten for room.
func (s *shadowLog) stats() (int, uint64) {
	s.once.Do(s.init)
	return s.seen.Len(), s.evicted.Load()
}

func (s *shadowLog) init() { s.seen, _ = lru.New[string, time.Time](maxShadowLogged) }

// first reports whether key was not logged within shadowLogInterval, and
// notes it as logged now.
func (s *shadowLog) first(key string, now time.Time) bool {
	s.once.Do(s.init)
	if last, ok := s.seen.Get(key); ok && now.Sub(last) < shadowLogInterval {
		return false
	}
	if s.seen.Add(key, now) {
		s.evicted.Add(1)
	}
	return true
}
