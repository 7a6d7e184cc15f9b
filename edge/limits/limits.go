package limits

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
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/early"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/reconcile"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/backendapi"
)

// Step is the limit step: it admits calls under the plan and operation
// rates, the daily cap, the stream leases and the environment quotas of
// the policy in force (Live), all counted in Redis. Build it with New.
type Step struct {
	Rates   *ratelimit.Limiter
	Streams *quota.Streams
	Envs    *quota.Environments
	// Reconciler, when set, is asked for a pass when a forced delete's list
	// of ended environments was cut short or could not be applied.
	Reconciler *reconcile.Reconciler

	onFailure config.FailureMode // limits.on_redis_failure
	now       func() time.Time
	log       *slog.Logger
	obs       Observer
	live      policy.Current // see Live and SetLive
	early     *early.Holds   // nil: no call is held
	builtins  *builtinRates
	shadows   shadowLog
	late      lateConfirms // confirmations Redis refused, retried
	onRefused func(subject, plan, limit string)
	headers   policyValues // see setRateLimitHeaders
}

// Options are what a Step is made of besides its policy.
type Options struct {
	// Rates decides the plan and operation rates and the daily cap.
	Rates *ratelimit.Limiter
	// Streams holds the stream leases, Envs the environment quotas.
	Streams *quota.Streams
	Envs    *quota.Environments
	// OnRedisFailure is limits.on_redis_failure: config.FailOpen or
	// config.FailClosed, for the stream lease and the quotas (Rates has
	// its own).
	OnRedisFailure config.FailureMode
	// Reconciler, when set, is kicked when a forced delete's ended
	// environments could not all be released (see Ended).
	Reconciler *reconcile.Reconciler
	Log        *slog.Logger
	// Observer counts what the step decides; nil: nothing is counted.
	Observer Observer
	// Early holds the calls of subjects that ignore the retry times of the
	// step's refusals (see EarlyHold); nil: none is held.
	Early *early.Holds
	// Refused is told the subject of each call a limit refused, with its
	// plan and the limit (the admin page's most refused subjects); nil:
	// nobody is. Admitted calls never reach it.
	Refused func(subject, plan, limit string)
}

// New returns the limit step, deciding under live until SetLive.
func New(live *policy.Live, o Options) *Step {
	l := &Step{Rates: o.Rates, Streams: o.Streams, Envs: o.Envs, Reconciler: o.Reconciler,
		onFailure: o.OnRedisFailure, now: time.Now, log: o.Log, obs: o.Observer, early: o.Early, builtins: newBuiltinRates(), onRefused: o.Refused}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.obs == nil {
		l.obs = nopObserver{}
	}
	l.live.Store(live)
	return l
}

// Live is the policy calls use now.
func (l *Step) Live() *policy.Live { return l.live.Load() }

// SetLive makes p the policy of every call that starts from now on.
func (l *Step) SetLive(p *policy.Live) { l.live.Store(p) }

// Reasons of the limit step's refusals.
const (
	reasonRate      = "RATE_LIMIT_EXCEEDED"
	reasonDaily     = "DAILY_LIMIT_EXCEEDED"
	reasonOperation = "OPERATION_RATE_EXCEEDED"
	// ReasonUnavailable: Redis failed, and the limit could not be
	// decided without it (limits.on_redis_failure is fail_closed, or the
	// call needs a bounded environment quota), or GetUsage could not read
	// the counts.
	ReasonUnavailable = "LIMITS_UNAVAILABLE"
)

// quotaLimit names the environment quotas to early.Holds: a refusal by a
// monthly quota names the month's end as the retry time.
const quotaLimit = "quota"

// EarlyHold returns the hold of a call (zero For: none) whose subject was
// lately refused, and told when to retry, by a limit that decides this
// call too, and that has called early too often since (early.Holds). A
// replay (see AdmitReplay) is decided by the plan's limits alone. The
// caller waits the hold out (Hold.Wait) and then calls Admit or
// AdmitReplay.
func (l *Step) EarlyHold(c wire.Call, p *identity.Principal, rule *policy.Rule, replay bool) early.Hold {
	if l.early == nil || !l.early.Remembers() || rule.Builtin {
		return early.Hold{}
	}
	var buf [4]string
	names := append(buf[:0], policy.PlanLimit, ratelimit.DailyName)
	if rule.RatePerMinute > 0 && !replay {
		names = append(names, policy.OperationPrefix+c.Method)
	}
	if rule.Quota == config.QuotaReserveEnvironment && !replay {
		names = append(names, quotaLimit)
	}
	return l.early.Arrive(p.Subject, names, l.now())
}

// Admission is what the limit step holds while a call runs. The zero
// Admission holds nothing: that of a call no limit applies to (an open
// procedure, policy.Rule.Open).
type Admission struct {
	plan     string
	limits   config.Plan // the plan's numbers under the call's live policy
	decision ratelimit.Decision
	lease    *quota.Lease
	reserved *quota.Reservation
	subject  string // whose reservation it is
	release  bool   // DeleteEnvironment: release the environment's quota on success
	replay   bool   // admitted as the retry of a completed call (AdmitReplay)
	obs      Observer
}

// Plan is the name of the plan the call was admitted under, and its
// numbers under the call's live policy.
func (a *Admission) Plan() (string, config.Plan) { return a.plan, a.limits }

// Decision is what the rate limiter decided of the call: with its source
// Redis, the subject's counts of today and this month, the call included.
func (a *Admission) Decision() ratelimit.Decision { return a.decision }

// Done ends what the Admission holds: the stream lease, and a reservation
// that no successful answer confirmed.
func (a *Admission) Done(ctx context.Context) {
	if a.lease != nil {
		a.lease.Release()
		a.lease = nil
		a.obs.LeaseHeld(-1)
	}
	if a.reserved != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if a.reserved.Rollback(ctx) == nil {
			a.obs.Reservation(ReservationRolledBack)
		}
		a.reserved = nil
	}
}

// Admit applies every limit of the call under pol, the policy the call
// read when it began. It writes the rate limit headers; when the call is
// refused it returns nil and the refusal to answer. The caller ends the
// admission with Done when the call ends. The span of ctx (edge.limits)
// gets the decision.
//
// All of a call's limits are decided together: a call refused by any of
// them consumes none. The stream lease and the environment reservation are
// taken first, then the rates in one round trip; a rate refusal gives the
// lease or the reservation back. So a plain unary call still costs one
// Redis round trip, and a call refused by its stream cap or a quota costs
// no rate and no daily count.
//
// A shadow limit (a plan's or an operation's, shadow: true) decides like
// any other, headers and metrics included, but what it refuses is admitted
// and counted as shadow_refused (see shadowed).
func (l *Step) Admit(ctx context.Context, w http.ResponseWriter, c wire.Call, p *identity.Principal, rule *policy.Rule, pol *policy.Live) (*Admission, *connect.Error) {
	return l.admitCall(ctx, w, c, p, rule, pol, false)
}

// Replayed reports whether the call was admitted as the retry of a
// completed call (AdmitReplay).
func (a *Admission) Replayed() bool { return a.replay }

// AdmitReplay admits a call whose answer the idempotency step holds
// already (a retry of a completed call): only the plan's rate and daily cap
// count it; the operation's rate and its quotas do not apply, since the
// operation does not run again.
func (l *Step) AdmitReplay(ctx context.Context, w http.ResponseWriter, c wire.Call, p *identity.Principal, rule *policy.Rule, pol *policy.Live) (*Admission, *connect.Error) {
	return l.admitCall(ctx, w, c, p, rule, pol, true)
}

func (l *Step) admitCall(ctx context.Context, w http.ResponseWriter, c wire.Call, p *identity.Principal, rule *policy.Rule, pol *policy.Live, replay bool) (*Admission, *connect.Error) {
	if rule.Builtin {
		return l.admitBuiltin(ctx, w, c, p, rule, pol)
	}
	planName, plan := pol.Limits.PlanFor(p.Plan, p.Subject)
	var req ratelimit.Request
	if replay {
		req = policy.Rates(p.Subject, plan)
	} else {
		req = policy.Rates(p.Subject, plan, rule.Operation)
	}
	req.SubjectSum = p.SubjectSum
	req.Policy = planName // for the operator API's inspect: the token's plan is known only here
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrPlan.String(planName))
	}
	a := &Admission{plan: planName, limits: plan, replay: replay, obs: l.obs}
	if !replay {
		if refusal := l.hold(ctx, w, a, c, p, rule, planName, pol); refusal != nil {
			return nil, refusal
		}
	}

	d, err := l.Rates.Allow(ctx, req)
	shadow := false
	if err == nil && !d.Allowed && (plan.Shadow || rule.Shadow && rule.RatePerMinute > 0) {
		// The headers say what enforcing would: those of the first decision.
		setRateLimitHeaders(w.Header(), &l.headers, d.States, l.now())
		d, shadow, err = l.shadowed(ctx, req, d, planName, plan, rule, p)
	}
	if err != nil {
		a.Done(ctx)
		l.traced(ctx, "unavailable", "")
		return nil, apierror.New(connect.CodeUnavailable, ReasonUnavailable, "limits cannot be checked now (Redis unavailable); retry later")
	}
	a.decision = d
	if !shadow {
		setRateLimitHeaders(w.Header(), &l.headers, d.States, l.now())
	}
	if !d.Allowed {
		a.Done(ctx) // the lease and the reservation go back: nothing is consumed
		l.early.Told(p.Subject, d.Refused, l.now(), d.RetryAfter, pol.Replaced())
		l.refused(ctx, p.Subject, planName, d.Refused)
		return nil, rateRefusal(d, planName)
	}
	if !shadow {
		l.decided(ctx, planName, "rate", true)
	}
	if rule.Quota == config.QuotaReleaseEnvironment && !replay {
		a.release = true
	}
	l.traced(ctx, "allowed", "")
	return a, nil
}

// hold takes the call's stream lease and environment reservation into a.
// It returns the refusal to answer when the stream cap or a quota refuses,
// or when Redis fails under fail_closed or for a bounded quota (which is
// never granted unchecked), having given back what it took.
func (l *Step) hold(ctx context.Context, w http.ResponseWriter, a *Admission, c wire.Call, p *identity.Principal, rule *policy.Rule, planName string, pol *policy.Live) *connect.Error {
	if rule.ConcurrentStreams > 0 && c.Streaming {
		lease, err := l.Streams.Acquire(ctx, p.Subject, rule.ConcurrentStreams)
		switch {
		case errors.Is(err, quota.ErrStreamLimit) && rule.Shadow:
			l.shadowRefused(ctx, planName, "streams", p)
		case errors.Is(err, quota.ErrStreamLimit):
			l.refused(ctx, p.Subject, planName, "streams")
			setQuotaHeaders(w.Header(), "streams", float64(rule.ConcurrentStreams), time.Time{}, 0, l.now())
			return apierror.New(connect.CodeResourceExhausted, quota.ReasonStreamLimit,
				fmt.Sprintf("at most %d %s streams may be open at once; close one first", rule.ConcurrentStreams, c.Method),
				apierror.WithMetadata("limit", strconv.Itoa(rule.ConcurrentStreams)))
		case err != nil:
			if e := l.outage(ctx, "stream lease", err); e != nil {
				return e
			}
		default:
			a.lease = lease
			l.obs.LeaseHeld(1)
		}
	}
	if rule.Quota != config.QuotaReserveEnvironment {
		return nil
	}
	q := policy.QuotaOf(pol.Limits.QuotasFor(p.Subject, planName))
	// A confirmation of this subject that Redis refused goes in first:
	// until it is in, Redis counts that environment as nothing.
	err := l.settleLate(ctx, p.Subject)
	var res *quota.Reservation
	if err == nil {
		res, err = l.Envs.Reserve(ctx, p.Subject, q, quota.Size(pol.Limits.EnvironmentSize))
	}
	var qe *quota.QuotaError
	switch {
	case errors.As(err, &qe):
		l.refused(ctx, p.Subject, planName, string(qe.Kind))
		l.obs.Reservation(ReservationRefused)
		a.Done(ctx)
		setQuotaHeaders(w.Header(), string(qe.Kind), qe.Limit, qe.RetryAt, monthWindow(qe), l.now())
		if !qe.RetryAt.IsZero() {
			l.early.Told(p.Subject, quotaLimit, l.now(), qe.RetryAt.Sub(l.now()), pol.Replaced())
		}
		return quotaRefusal(qe, l.now())
	case err != nil && q.Bounded():
		// A quota that cannot be checked is not granted, whatever the
		// failure mode: an environment created now would never have been
		// counted against it (docs/limits.md, "When Redis fails").
		a.Done(ctx)
		l.traced(ctx, "unavailable", "")
		return apierror.New(connect.CodeUnavailable, ReasonUnavailable, "the environment quota cannot be checked now (Redis unavailable); retry later",
			apierror.WithRetryAfter(time.Second))
	case err != nil:
		if e := l.outage(ctx, "environment quota", err); e != nil {
			a.Done(ctx)
			return e
		}
	default:
		a.reserved, a.subject = res, p.Subject
		l.obs.Reservation(ReservationReserved)
	}
	return nil
}

// monthWindow is the window of a monthly quota, for RateLimit-Policy: the
// length of the month it renews after; 0 for the concurrent quota.
func monthWindow(qe *quota.QuotaError) time.Duration {
	if qe.RetryAt.IsZero() {
		return 0
	}
	return qe.RetryAt.Sub(qe.RetryAt.AddDate(0, -1, 0))
}

// decided counts one limit decision and notes a refusal on the span of ctx.
func (l *Step) decided(ctx context.Context, plan, limit string, allowed bool) {
	l.obs.Decided(plan, limit, allowed)
	if !allowed {
		l.traced(ctx, "refused", limit)
	}
}

// refused counts a refusal of subject's call by limit, as decided does,
// and tells Options.Refused.
func (l *Step) refused(ctx context.Context, subject, plan, limit string) {
	l.decided(ctx, plan, limit, false)
	if l.onRefused != nil {
		l.onRefused(subject, plan, limit)
	}
}

// traced notes the limit step's outcome on the span of ctx (allowed when
// nothing is noted).
func (l *Step) traced(ctx context.Context, outcome, limit string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrLimitsOutcome.String(outcome))
		if limit != "" {
			span.SetAttributes(attrLimit.String(limit))
		}
	}
}

// outage applies the Redis failure policy to a lease or quota call that
// Redis could not answer: nil to go on without it.
func (l *Step) outage(ctx context.Context, what string, err error) *connect.Error {
	if l.onFailure == config.FailClosed {
		l.traced(ctx, "unavailable", "")
		return apierror.New(connect.CodeUnavailable, ReasonUnavailable, what+" cannot be checked now (Redis unavailable); retry later")
	}
	l.log.WarnContext(ctx, "redis unavailable: admitting without "+what, "err", err)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrFailOpen.Bool(true))
	}
	return nil
}

// Answered sees the backend's answer to a call whose quota depends on it:
// it confirms a reservation with the new environment's id, or releases a
// deleted environment's quota. body is the whole answer and read what
// wire.Of read of it (wire.OfResponse), or readErr why it could not be
// read.
//
// An answer the backend gave as a failure leaves the reservation to Done,
// which rolls it back. A successful answer the edge cannot read never does: the
// environment may exist. The reservation is then kept as a running
// environment under a placeholder, counted in
// edge_quota_unreadable_answers_total, logged, and left to reconciliation;
// likewise an unreadable DeleteEnvironment releases nothing until
// reconciliation finds the environment gone.
func (l *Step) Answered(ctx context.Context, a *Admission, c wire.Call, res *http.Response, body []byte, reading wire.Reading, readErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	read := func(msg proto.Message) error {
		if readErr != nil {
			if res.StatusCode != http.StatusOK {
				return wire.ErrFailed
			}
			return readErr
		}
		return wire.UnaryMessage(c, res, body, reading, msg)
	}
	switch {
	case a.reserved != nil:
		created := new(svcv1.CreateEnvironmentResponse)
		err := read(created)
		switch {
		case errors.Is(err, wire.ErrFailed):
			return // Done rolls the reservation back
		case err == nil && created.Environment.GetId() == "":
			err = errors.New("no environment id in the answer")
		}
		if err != nil {
			l.unreadable(ctx, c, err)
			if err := a.reserved.Unreadable(ctx); err != nil {
				l.log.WarnContext(ctx, "environment quota: keeping an unreadable answer's reservation failed", "err", err)
			}
			a.reserved = nil
			return
		}
		start := l.now()
		if t := created.Environment.GetCreatedAt(); t != nil {
			start = t.AsTime()
		}
		if err := a.reserved.Confirm(ctx, created.Environment.Id, start); err != nil {
			// Never a free slot: the reservation stays held (Rollback does
			// nothing once Confirm was called) and the confirmation is
			// retried until Redis takes it.
			l.log.WarnContext(ctx, "environment quota: confirm failed; retrying until Redis takes it", "err", err)
			l.confirmLater(a.subject, lateConfirm{res: a.reserved, id: created.Environment.Id, start: start})
		} else {
			l.obs.Reservation(ReservationConfirmed)
		}
		a.reserved = nil
	case a.release:
		deleted := new(svcv1.DeleteEnvironmentResponse)
		err := read(deleted)
		switch {
		case errors.Is(err, wire.ErrFailed):
			return
		case err == nil && deleted.Environment.GetId() == "":
			err = errors.New("no environment id in the answer")
		}
		if err != nil {
			l.unreadable(ctx, c, err)
			return
		}
		end := l.now()
		if t := deleted.Environment.GetDeletedAt(); t != nil {
			end = t.AsTime()
		}
		if err := l.Envs.Release(ctx, deleted.Environment.Id, end); err != nil {
			l.log.WarnContext(ctx, "environment quota: release failed", "err", err)
		} else {
			l.obs.Reservation(ReservationReleased)
		}
	}
}

// unreadable counts and logs a successful answer the edge could not read.
func (l *Step) unreadable(ctx context.Context, c wire.Call, err error) {
	l.obs.UnreadableAnswer(c.Method)
	l.log.WarnContext(ctx, "environment quota: cannot read a successful answer; kept as it is until reconciliation",
		"procedure", c.Procedure, "protocol", c.Protocol, "err", err)
}

// Ended releases, at once, the environments that a forced DeleteProject or
// DeleteOrganization ended, as the backend listed them
// (backendapi.EndedHeader; see EndedEnvironments). When the list was cut
// short (backendapi.EndedMoreHeader) or Redis did not take it, the
// reconciler, if there is one, is kicked for a pass now.
func (l *Step) Ended(ctx context.Context, ids []string, more bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if len(ids) > 0 {
		n, err := l.Envs.ReleaseAll(ctx, ids, l.now())
		if err != nil {
			l.log.WarnContext(ctx, "environment quota: releasing the environments of a forced delete failed; reconciliation will", "err", err)
			more = true
		}
		for range n {
			l.obs.Reservation(ReservationReleased)
		}
	}
	if more && l.Reconciler != nil {
		l.Reconciler.Kick()
	}
}

// WatchesAnswer reports whether the edge must read the backend's answer.
func (a *Admission) WatchesAnswer() bool { return a != nil && (a.reserved != nil || a.release) }

// maxWatchedAnswer bounds an answer the edge reads for quotas (before
// decompression; wire bounds it after).
const maxWatchedAnswer = 1 << 20

// EndedEnvironments reads the backend's list of the environments a call
// ended (backendapi.EndedHeader, EndedMoreHeader) and removes it from the answer: it is
// for the edge alone. ok reports whether there was one.
func EndedEnvironments(h http.Header) (ids []string, more, ok bool) {
	values, moreValue := h[backendapi.EndedHeader], wire.FirstValue(h[backendapi.EndedMoreHeader])
	if len(values) == 0 && moreValue == "" {
		return nil, false, false
	}
	delete(h, backendapi.EndedHeader)
	delete(h, backendapi.EndedMoreHeader)
	for _, v := range values {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" && len(id) <= 128 && len(ids) < maxEndedEnvironments {
				ids = append(ids, id)
			}
		}
	}
	return ids, moreValue != "", true
}

// maxEndedEnvironments bounds the ids the edge takes from one answer.
const maxEndedEnvironments = 1000

// ReadAnswer reads a whole answer whose quota effect the step must know
// (Admission.WatchesAnswer), for Answered, and puts it back for the
// client. An answer over maxWatchedAnswer is not read: it is put back
// whole and the error says so.
func ReadAnswer(res *http.Response) ([]byte, error) {
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

// setQuotaHeaders writes the rate limit headers of a call refused by a
// quota or the stream cap before any rate was consulted (consulting one
// would consume it): the limit that applied is the quota, with nothing
// left. window is 0 for a concurrent limit, which has none (it frees when
// something ends, reset is then now).
func setQuotaHeaders(h http.Header, name string, limit float64, reset time.Time, window time.Duration, now time.Time) {
	q := int64(math.Ceil(limit))
	if reset.IsZero() || reset.Before(now) {
		reset = now
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(q, 10))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	policy := fmt.Sprintf("%s;q=%d", strconv.Quote(name), q)
	if window > 0 {
		policy += fmt.Sprintf(";w=%d", int64(window/time.Second))
	}
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", fmt.Sprintf("%s;r=0;t=%d", strconv.Quote(name), ceilSeconds(reset.Sub(now))))
}

func rateRefusal(d ratelimit.Decision, plan string) *connect.Error {
	reason, msg := reasonRate, fmt.Sprintf("rate limit of the %s plan exceeded", plan)
	switch {
	case d.Refused == ratelimit.DailyName:
		reason, msg = reasonDaily, fmt.Sprintf("daily request limit of the %s plan exceeded", plan)
	case strings.HasPrefix(d.Refused, policy.OperationPrefix):
		reason, msg = reasonOperation, fmt.Sprintf("rate limit of %s exceeded", strings.TrimPrefix(d.Refused, policy.OperationPrefix))
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
// fields (draft-ietf-httpapi-ratelimit-headers) for every limit. One meaning
// for all five: a limit is its bucket, whose capacity is the burst
// (X-RateLimit-Limit, q) and which refills from empty in w seconds (burst
// over the rate); what is left (X-RateLimit-Remaining, r) is never more than
// the capacity, and the reset (X-RateLimit-Reset, t) is when the bucket is
// full again. For the daily cap the capacity is the cap and w a day.
func setRateLimitHeaders(h http.Header, c *policyValues, states []ratelimit.State, now time.Time) {
	if len(states) == 0 {
		return
	}
	p := c.of(states)
	t := 0
	for i := range states {
		if states[i].Remaining < states[t].Remaining {
			t = i
		}
	}
	tight := states[t]
	// What changes per call is written into one buffer (on the stack for
	// the usual two or three limits) and copied into one string, which
	// the three values that depend on the call share.
	var a [128]byte
	b := strconv.AppendInt(a[:0], int64(min(max(tight.Remaining, 0), tight.Burst)), 10)
	remaining := len(b)
	b = strconv.AppendInt(b, now.Add(time.Duration(ceilSeconds(tight.ResetAfter))*time.Second).Unix(), 10)
	reset := len(b)
	for i, s := range states {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, p.names[i]...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, int64(min(max(s.Remaining, 0), s.Burst)), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(s.ResetAfter), 10)
	}
	all := string(b)
	// One allocation for the five values, and keys already in canonical
	// form: Header.Set would canonicalize (and allocate) each on every call.
	v := []string{p.bursts[t], all[:remaining], all[remaining:reset], p.policy, all[reset:]}
	h["X-Ratelimit-Limit"] = v[0:1:1]
	h["X-Ratelimit-Remaining"] = v[1:2:2]
	h["X-Ratelimit-Reset"] = v[2:3:3]
	h["Ratelimit-Policy"] = v[3:4:4]
	h["Ratelimit"] = v[4:5:5]
}

// policyValues keeps, for the last few sets of limits a step wrote headers
// for, what those headers say whatever the call (the RateLimit-Policy value,
// each limit's quoted name and burst), so that a call formats only its own
// numbers. The sets are few (a plan's rate and daily cap, an operation's
// rate, and what a refusal or Redis's failure leaves of them), so the last
// eight nearly always hold the call's; a set they miss is formatted as
// before and takes the oldest slot. The zero value is empty and ready.
type policyValues struct {
	slots [8]atomic.Pointer[limitsValues]
	next  atomic.Uint32
}

// limitsValues is what the headers of one set of limits say whatever the
// call; spec holds the fields of its states they depend on.
type limitsValues struct {
	spec   []ratelimit.State // Name, Limit, Burst, Window; the rest zero
	names  []string          // each limit's name, quoted
	bursts []string          // each limit's burst, as X-RateLimit-Limit
	policy string            // RateLimit-Policy
}

func (c *policyValues) of(states []ratelimit.State) *limitsValues {
	for i := range c.slots {
		if v := c.slots[i].Load(); v != nil && v.describes(states) {
			return v
		}
	}
	v := newLimitsValues(states)
	c.slots[(c.next.Add(1)-1)%uint32(len(c.slots))].Store(v)
	return v
}

func (v *limitsValues) describes(states []ratelimit.State) bool {
	if len(states) != len(v.spec) {
		return false
	}
	for i, s := range states {
		w := &v.spec[i]
		if s.Name != w.Name || s.Burst != w.Burst || s.Limit != w.Limit || s.Window != w.Window {
			return false
		}
	}
	return true
}

func newLimitsValues(states []ratelimit.State) *limitsValues {
	v := &limitsValues{
		spec:   make([]ratelimit.State, len(states)),
		names:  make([]string, len(states)),
		bursts: make([]string, len(states)),
	}
	policy := make([]byte, 0, 40*len(states))
	for i, s := range states {
		v.spec[i] = ratelimit.State{Name: s.Name, Limit: s.Limit, Burst: s.Burst, Window: s.Window}
		v.names[i] = strconv.Quote(s.Name)
		v.bursts[i] = strconv.Itoa(s.Burst)
		if i > 0 {
			policy = append(policy, ", "...)
		}
		policy = append(policy, v.names[i]...)
		policy = append(policy, ";q="...)
		policy = strconv.AppendInt(policy, int64(s.Burst), 10)
		policy = append(policy, ";w="...)
		policy = strconv.AppendInt(policy, refillSeconds(s), 10)
	}
	v.policy = string(policy)
	return v
}

// refillSeconds is how long s's bucket takes to fill from empty: its burst
// at its rate (Limit per Window), in whole seconds, rounded up.
func refillSeconds(s ratelimit.State) int64 {
	if s.Limit <= 0 {
		return int64(s.Window / time.Second)
	}
	return ceilSeconds(time.Duration(s.Burst) * s.Window / time.Duration(s.Limit))
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
