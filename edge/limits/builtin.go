package limits

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// The rate of the edge's own procedures (reflection), per subject and
// replica: BuiltinPerMinute calls a minute, BuiltinBurst at once. grpcurl
// and buf curl open one reflection stream per command.
const (
	BuiltinPerMinute = 60
	BuiltinBurst     = 20
	// builtinSubjects bounds the subjects whose rate is remembered.
	builtinSubjects = 100_000
)

// ReasonBuiltinRate is the ErrorInfo reason of a call of one of the edge's
// own procedures past its rate.
const ReasonBuiltinRate = "BUILTIN_RATE_EXCEEDED"

// builtinRates bound the edge's own procedures (reflection) per subject,
// in the replica's memory. They read nothing but memory, so they are not
// charged to any plan: a subject over its plan's rate still reads the
// schema, and grpcurl or buf curl then show it the refusal of its call,
// not a failed schema lookup. A flood of them costs no Redis.
type builtinRates struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, *rate.Limiter]
}

func newBuiltinRates() *builtinRates {
	lru, _ := simplelru.NewLRU[string, *rate.Limiter](builtinSubjects, nil) // size > 0: no error
	return &builtinRates{lru: lru}
}

// reserve takes a call from subject's bucket, or returns how long until one
// is there.
func (b *builtinRates) reserve(subject string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.lru.Get(subject)
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(BuiltinPerMinute)/60), BuiltinBurst)
		b.lru.Add(subject, l)
	}
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// admitBuiltin admits a call of one of the edge's own procedures: its own
// rate, and, for a stream, a lease of the subject's stream cap.
func (l *Step) admitBuiltin(ctx context.Context, w http.ResponseWriter, c wire.Call, p *identity.Principal, rule *policy.Rule, pol *policy.Live) (*Admission, *connect.Error) {
	if wait := l.builtins.reserve(p.Subject, l.now()); wait > 0 {
		l.traced(ctx, "refused", "builtin")
		return nil, apierror.New(connect.CodeResourceExhausted, ReasonBuiltinRate,
			fmt.Sprintf("at most %d calls of %s a minute; retry later", BuiltinPerMinute, c.Procedure),
			apierror.WithRetryAfter(wait), apierror.WithMetadata("limit", strconv.Itoa(BuiltinPerMinute)))
	}
	planName, _ := pol.Limits.PlanFor(p.Plan, p.Subject) // for the stream cap's metrics
	a := &Admission{plan: planName, obs: l.obs}
	if refusal := l.hold(ctx, w, a, c, p, rule, planName, pol); refusal != nil {
		return nil, refusal
	}
	l.traced(ctx, "allowed", "")
	return a, nil
}
