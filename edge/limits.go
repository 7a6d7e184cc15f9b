package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/identity"
)

// Limits is the limit step: plan and operation rates, concurrent-stream
// leases and environment quotas, all in Redis.
type Limits struct {
	Config  config.Limits
	Rates   *ratelimit.Limiter
	Streams *quota.Streams
	Envs    *quota.Environments
	Now     func() time.Time
	Log     *slog.Logger

	metrics *Metrics
	policy  atomic.Pointer[Policy] // see Policy and App.Reload
	shadows shadowLog
}

// Reasons of the limit step's refusals.
const (
	reasonRate        = "RATE_LIMIT_EXCEEDED"
	reasonDaily       = "DAILY_LIMIT_EXCEEDED"
	reasonOperation   = "OPERATION_RATE_EXCEEDED"
	reasonUnavailable = "LIMITS_UNAVAILABLE"
	planLimit         = "plan"
	operationPrefix   = "op:"
)

// admission is what the limit step holds while a call runs.
type admission struct {
	plan     string
	limits   config.Plan // the plan's numbers under the call's policy
	decision ratelimit.Decision
	lease    *quota.Lease
	reserved *quota.Reservation
	release  bool // DeleteEnvironment: release the environment's quota on success
	metrics  *Metrics
}

// done ends what the admission holds: the stream lease, and a reservation
// that no successful answer confirmed.
func (a *admission) done(ctx context.Context) {
	if a.lease != nil {
		a.lease.Release()
		a.lease = nil
		a.metrics.leaseHeld(-1)
	}
	if a.reserved != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if a.reserved.Rollback(ctx) == nil {
			a.metrics.reservation(reservationRolledBack)
		}
		a.reserved = nil
	}
}

// admit applies every limit of the call under pol. It writes the rate
// limit headers; when the call is refused it returns nil and the refusal to
// answer. ctx carries the edge.limits span, which gets the decision.
//
// A shadow limit (a plan's or an operation's, shadow: true) decides like
// any other, headers and metrics included, but what it refuses is admitted
// and counted as shadow_refused (see shadowed).
func (l *Limits) admit(ctx context.Context, w http.ResponseWriter, c classify.Call, p *identity.Principal, rule *policy.Rule, pol *Policy) (*admission, *connect.Error) {
	planName, plan := pol.Limits.PlanFor(p.Plan, p.Subject)
	req := ratelimit.Request{
		Subject: p.Subject,
		Limits:  []ratelimit.Limit{{Name: planLimit, Rate: plan.RequestsPerMinute, Period: time.Minute, Burst: plan.Burst}},
		Daily:   plan.RequestsPerDay,
	}
	if rule.RatePerMinute > 0 {
		req.Limits = append(req.Limits, ratelimit.Limit{Name: operationPrefix + c.Method, Rate: rule.RatePerMinute, Period: time.Minute, Burst: rule.RatePerMinute})
	}
	d, err := l.Rates.Allow(ctx, req)
	shadow := false
	if err == nil && !d.Allowed && (plan.Shadow || rule.Shadow && rule.RatePerMinute > 0) {
		// The headers say what enforcing would: those of the first decision.
		setRateLimitHeaders(w.Header(), d.States, l.Now())
		d, shadow, err = l.shadowed(ctx, req, d, planName, plan, rule, p)
	}
	if err != nil {
		l.traced(ctx, "unavailable", "")
		return nil, apierror.New(connect.CodeUnavailable, reasonUnavailable, "limits cannot be checked now (Redis unavailable); retry later")
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrPlan.String(planName))
	}
	a := &admission{plan: planName, limits: plan, decision: d, metrics: l.metrics}
	if !shadow {
		setRateLimitHeaders(w.Header(), d.States, l.Now())
	}
	if !d.Allowed {
		l.decided(ctx, planName, d.Refused, false)
		return nil, rateRefusal(d, planName)
	}
	if !shadow {
		l.decided(ctx, planName, "rate", true)
	}

	if rule.ConcurrentStreams > 0 && c.Streaming {
		lease, err := l.Streams.Acquire(ctx, p.Subject, rule.ConcurrentStreams)
		switch {
		case errors.Is(err, quota.ErrStreamLimit) && rule.Shadow:
			l.shadowRefused(ctx, planName, "streams", p)
		case errors.Is(err, quota.ErrStreamLimit):
			l.decided(ctx, planName, "streams", false)
			return nil, apierror.New(connect.CodeResourceExhausted, quota.ReasonStreamLimit,
				fmt.Sprintf("at most %d %s streams may be open at once; close one first", rule.ConcurrentStreams, c.Method),
				apierror.WithMetadata("limit", strconv.Itoa(rule.ConcurrentStreams)))
		case err != nil:
			if e := l.outage(ctx, "stream lease", err); e != nil {
				return nil, e
			}
		default:
			a.lease = lease
			l.metrics.leaseHeld(1)
		}
	}

	switch rule.Quota {
	case config.QuotaReserveEnvironment:
		q := quota.Quota(pol.Limits.QuotasFor(p.Subject, planName))
		res, err := l.Envs.Reserve(ctx, p.Subject, q, quota.Size(pol.Limits.EnvironmentSize))
		var qe *quota.QuotaError
		switch {
		case errors.As(err, &qe):
			l.decided(ctx, planName, string(qe.Kind), false)
			l.metrics.reservation(reservationRefused)
			a.done(ctx)
			return nil, quotaRefusal(qe, l.Now())
		case err != nil:
			if e := l.outage(ctx, "environment quota", err); e != nil {
				a.done(ctx)
				return nil, e
			}
		default:
			a.reserved = res
			l.metrics.reservation(reservationReserved)
		}
	case config.QuotaReleaseEnvironment:
		a.release = true
	}
	l.traced(ctx, "allowed", "")
	return a, nil
}

// decided counts one limit decision and notes a refusal on the span of ctx.
func (l *Limits) decided(ctx context.Context, plan, limit string, allowed bool) {
	l.metrics.decided(plan, limit, allowed)
	if !allowed {
		l.traced(ctx, "refused", limit)
	}
}

// traced notes the limit step's outcome on the span of ctx (allowed when
// nothing is noted).
func (l *Limits) traced(ctx context.Context, outcome, limit string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrLimitsOutcome.String(outcome))
		if limit != "" {
			span.SetAttributes(attrLimit.String(limit))
		}
	}
}

// outage applies the Redis failure policy to a lease or quota call that
// Redis could not answer: nil to go on without it.
func (l *Limits) outage(ctx context.Context, what string, err error) *connect.Error {
	if l.Config.OnRedisFailure == config.FailClosed {
		l.traced(ctx, "unavailable", "")
		return apierror.New(connect.CodeUnavailable, reasonUnavailable, what+" cannot be checked now (Redis unavailable); retry later")
	}
	l.Log.WarnContext(ctx, "redis unavailable: admitting without "+what, "err", err)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrLimitsFailOpen.Bool(true))
	}
	return nil
}

// answered sees the backend's answer to a call whose quota depends on it:
// it confirms a reservation with the new environment's id, or releases a
// deleted environment's quota. body is the whole answer.
func (l *Limits) answered(ctx context.Context, a *admission, c classify.Call, res *http.Response, body []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	switch {
	case a.reserved != nil:
		created := new(svcv1.CreateEnvironmentResponse)
		if err := wire.UnaryMessage(c, res, body, created); err != nil || created.Environment.GetId() == "" {
			return // done() rolls the reservation back
		}
		start := l.Now()
		if t := created.Environment.GetCreatedAt(); t != nil {
			start = t.AsTime()
		}
		if err := a.reserved.Confirm(ctx, created.Environment.Id, start); err != nil {
			l.Log.WarnContext(ctx, "environment quota: confirm failed", "err", err)
		} else {
			l.metrics.reservation(reservationConfirmed)
		}
		a.reserved = nil
	case a.release:
		deleted := new(svcv1.DeleteEnvironmentResponse)
		if err := wire.UnaryMessage(c, res, body, deleted); err != nil || deleted.Environment.GetId() == "" {
			return
		}
		end := l.Now()
		if t := deleted.Environment.GetDeletedAt(); t != nil {
			end = t.AsTime()
		}
		if err := l.Envs.Release(ctx, deleted.Environment.Id, end); err != nil {
			l.Log.WarnContext(ctx, "environment quota: release failed", "err", err)
		} else {
			l.metrics.reservation(reservationReleased)
		}
	}
}

// watchesAnswer reports whether the edge must read the backend's answer.
func (a *admission) watchesAnswer() bool { return a != nil && (a.reserved != nil || a.release) }

// maxWatchedAnswer bounds an answer the edge reads for quotas.
const maxWatchedAnswer = 1 << 20

// readAnswer reads a whole answer and puts it back for the client.
func readAnswer(res *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxWatchedAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxWatchedAnswer {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
		return nil, errors.New("answer too large to read")
	}
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func rateRefusal(d ratelimit.Decision, plan string) *connect.Error {
	reason, msg := reasonRate, fmt.Sprintf("rate limit of the %s plan exceeded", plan)
	switch {
	case d.Refused == ratelimit.DailyName:
		reason, msg = reasonDaily, fmt.Sprintf("daily request limit of the %s plan exceeded", plan)
	case strings.HasPrefix(d.Refused, operationPrefix):
		reason, msg = reasonOperation, fmt.Sprintf("rate limit of %s exceeded", strings.TrimPrefix(d.Refused, operationPrefix))
	}
	retry := time.Duration(math.Ceil(d.RetryAfter.Seconds())) * time.Second
	return apierror.New(connect.CodeResourceExhausted, reason, fmt.Sprintf("%s; retry after %s", msg, retry),
		apierror.WithRetryAfter(d.RetryAfter),
		apierror.WithMetadata("limit", d.Refused),
		apierror.WithMetadata("plan", plan))
}

func quotaRefusal(qe *quota.QuotaError, now time.Time) *connect.Error {
	opts := []apierror.Option{
		apierror.WithDetail(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: string(qe.Kind), Description: qe.Description,
		}}}),
		apierror.WithMetadata("quota", string(qe.Kind)),
		apierror.WithMetadata("limit", strconv.FormatFloat(qe.Limit, 'f', -1, 64)),
		apierror.WithMetadata("used", strconv.FormatFloat(qe.Used, 'f', -1, 64)),
	}
	if !qe.RetryAt.IsZero() {
		opts = append(opts, apierror.WithRetryAfter(qe.RetryAt.Sub(now)))
	}
	return apierror.New(connect.CodeResourceExhausted, qe.Reason, qe.Description, opts...)
}

// setRateLimitHeaders writes X-RateLimit-* for the tightest limit (the one
// with the fewest requests left) and the IETF RateLimit-Policy and RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers) for every limit.
func setRateLimitHeaders(h http.Header, states []ratelimit.State, now time.Time) {
	if len(states) == 0 {
		return
	}
	tight := states[0]
	policies := make([]string, 0, len(states))
	current := make([]string, 0, len(states))
	for _, s := range states {
		if s.Remaining < tight.Remaining {
			tight = s
		}
		name := strconv.Quote(s.Name)
		policies = append(policies, fmt.Sprintf("%s;q=%d;w=%d", name, s.Limit, int64(s.Window/time.Second)))
		current = append(current, fmt.Sprintf("%s;r=%d;t=%d", name, max(s.Remaining, 0), ceilSeconds(s.ResetAfter)))
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(tight.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(tight.Remaining, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Duration(ceilSeconds(tight.ResetAfter))*time.Second).Unix(), 10))
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", strings.Join(current, ", "))
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
