// Package edge is the API edge's request chain: one http.Handler that
// classifies each call, bounds its body, authenticates and authorizes its
// caller, applies its limits and idempotency, and forwards it to the backend
// in the caller's own protocol, answering refusals in that protocol too.
// The steps live in the packages beside this one (docs/architecture.md);
// this package orders them, and observes each call as a whole: its result,
// metrics, span and access line (edge/forward times the backend's part).
//
// It is not where the edge is built or started (edge/app), where a call's
// state lives (edge/call), nor where what it counts is exported
// (edge/observe).
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/early"
	"github.com/orgedge/edge/edge/forward"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/usage"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// Options are what the edge is made of.
type Options struct {
	Config     *config.Config
	Auth       *authn.Authenticator
	Procedures wire.Procedures
	Logger     *slog.Logger
	Metrics    *observe.Metrics // optional
	Limits     *limits.Step
	// Idempotency replays calls that carry Idempotency-Key; nil: off.
	Idempotency *idempotency.Step
	// TracerProvider makes the edge's spans; nil: the global provider
	// (otel.GetTracerProvider), a no-op unless the process set one up.
	TracerProvider trace.TracerProvider
	// Pool is the backends, and Forward the last step, which sends an
	// admitted call to them (both built by edge/app from upstream).
	Pool    *proxy.Pool
	Forward *forward.Step
	// Builtins answer the procedures the edge serves itself
	// (config.BuiltinProcedures) in place of the backend, once the chain
	// admitted the call.
	Builtins map[string]http.Handler
}

// Server is the edge's API handler.
type Server struct {
	cfg      *config.Config
	auth     *authn.Authenticator
	procs    wire.Procedures
	forward  *forward.Step
	pool     *proxy.Pool
	log      *slog.Logger
	access   observe.AccessLog
	metrics  *observe.Metrics
	limits   *limits.Step
	idem     *idempotency.Step
	usage    *usage.Step
	builtins map[string]http.Handler
	bodies   reqbody.Options
	tracing  observe.Tracing
	// inFlight counts the unary calls being served, against
	// listen.max_calls_in_flight.
	inFlight atomic.Int64
}

// New assembles the chain.
func New(o Options) (*Server, error) {
	if o.Limits == nil || o.Pool == nil || o.Forward == nil {
		return nil, errors.New("edge: the limit step, the pool and the forward step are required")
	}
	s := &Server{
		cfg:      o.Config,
		auth:     o.Auth,
		procs:    o.Procedures,
		log:      o.Logger,
		metrics:  o.Metrics,
		limits:   o.Limits,
		idem:     o.Idempotency,
		builtins: o.Builtins,
		bodies: reqbody.Options{MaxBytes: int64(o.Config.Requests.MaxBodyBytes),
			Timeout: o.Config.Requests.BodyTimeout, MessageTimeout: o.Config.Requests.StreamMessageTimeout},
		tracing: observe.NewTracing(o.TracerProvider),
		pool:    o.Pool,
		forward: o.Forward,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.access = observe.AccessLog{Log: s.log, SampleOK: o.Config.Log.SampleOK, Metrics: o.Metrics}
	s.usage = usage.New(o.Limits)
	o.Metrics.Streaming(o.Procedures)
	return s, nil
}

// Close stops the upstream pool's background work and closes its idle
// connections.
func (s *Server) Close() { s.pool.Close() }

// EndStreams ends every open stream with unavailable in its protocol, for
// a shutdown: its client reconnects to another replica (see
// forward.Step.EndStreams). Unary calls are left to finish.
func (s *Server) EndStreams() { s.forward.EndStreams() }

// Backends lists the upstream backends and the calls each got.
func (s *Server) Backends() []proxy.Backend { return s.pool.Backends() }

// ServeHTTP runs one call through the chain.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.metrics.Serving(1)
	defer s.metrics.Serving(-1)
	var b begun
	s.begin(w, r, &b)
	defer b.span.End()
	principal := s.serve(&b)
	s.finish(&b, principal)
}

// begun is a call as the chain starts it.
type begun struct {
	start   time.Time
	r       *http.Request // with the call's span in its context
	rec     *call.Recorder
	span    trace.Span
	c       wire.Call
	problem wire.Problem
}

// begin names the call (X-Request-Id), classifies it, starts its record and
// its span. (Apart from ServeHTTP, whose frame stays on an open stream's
// stack: see proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (s *Server) begin(w http.ResponseWriter, r *http.Request, b *begun) {
	b.start = time.Now()
	id := call.RequestID(wire.FirstValue(r.Header["X-Request-Id"]))
	b.c, b.problem = wire.Classify(r, s.procs)
	b.rec = call.NewRecorder(w, b.c)
	b.rec.Name(r, id)
	var ctx context.Context
	ctx, b.span = s.tracing.StartServer(r, b.c)
	b.r = r
	if ctx != r.Context() { // a span began: not when tracing is off
		b.r = r.WithContext(ctx)
	}
}

// finish counts, traces and logs a call once it is over. (Apart from
// ServeHTTP, whose frame stays on an open stream's stack while the stream
// waits for its next message: see proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (s *Server) finish(b *begun, principal *identity.Principal) {
	rec, r, c, span, start := b.rec, b.r, b.c, b.span, b.start
	d := time.Since(start)
	code := rec.Result(c, r.Context().Err() != nil)
	outcome := rec.Outcome(code)
	if outcome == call.OutcomeForwarded {
		s.metrics.Overhead(c, d-rec.Upstream())
	}
	switch code {
	case "deadline_exceeded":
		s.metrics.DeadlineExceeded(rec.DeadlineOrigin())
	case "unavailable":
		s.metrics.Unavailable(rec.UnavailableReason())
	}
	observe.EndServer(span, c, code, rec.Status())
	s.access.Write(r, c, principal, rec, code, outcome, d)
	// Last, and edge_requests_total last within it: a scrape that counts
	// the call there finds it in every other series too, and its access
	// line written or queued (unless sampled out).
	s.metrics.Observe(c, code, outcome, d)
}

// overloaded is the answer to a call past listen.max_calls_in_flight.
func overloaded() *connect.Error {
	return apierror.New(connect.CodeUnavailable, call.ReasonOverloaded,
		"the edge is serving as many calls as it may (listen.max_calls_in_flight); retry later",
		apierror.WithRetryAfter(time.Second))
}

func (s *Server) serve(b *begun) *identity.Principal {
	// In parts, each its own function, and one deferred call: what stays on
	// an open stream's stack (this frame, below the forwarding) is kept
	// small (see proxy.Proxy.ServeHTTP). Each thing to undo is noted in e as
	// soon as it is done.
	var e ending
	defer s.end(b, &e)
	w, r := b.rec, b.r
	if s.refusedUnread(w, r, b.problem) {
		return nil
	}
	if max := int64(s.cfg.Listen.MaxCallsInFlight); max > 0 && !b.c.Streaming {
		if e.inFlight = s.enter(w, r, max); !e.inFlight {
			return nil
		}
	}
	// Bound the body in time (from now: its headers are in) and in size.
	body := reqbody.Bound(w, r, b.c.Streaming, s.bodies)
	e.body = body

	p, rule, admitted := s.admit(w, r, b.c, &e)
	if admitted == nil {
		return p
	}
	e.admitted = admitted
	if b.c.Procedure == usage.Procedure {
		s.usage.Serve(w, r, b.c, p, admitted)
		return p
	}
	if b.c.Streaming {
		e.streamClosed = s.metrics.StreamOpened(b.c)
	}
	r, e.cancel = s.callContext(b, p, rule, admitted, body)
	if rule.Builtin { // the edge's own procedure: only its calls look it up
		if h := s.builtins[b.c.Procedure]; h != nil {
			w.AnswersItself()
			h.ServeHTTP(w, r)
			return p
		}
	}
	if s.idem != nil && !b.c.Streaming {
		s.idempotency(w, r, b.c, p.Subject, rule.Idempotent, admitted.Replayed())
		return p
	}
	s.forward.ServeHTTP(w, r)
	return p
}

// ending is what a call undoes when it ends, noted as each is done.
type ending struct {
	inFlight     bool // counted in s.inFlight
	body         *reqbody.Body
	admitted     *limits.Admission // done in the context of the call as begun
	streamClosed func()
	cancel       context.CancelFunc
}

// end undoes, last done first, what e notes of the call b.
func (s *Server) end(b *begun, e *ending) {
	if e.cancel != nil {
		e.cancel()
	}
	if e.streamClosed != nil {
		e.streamClosed()
	}
	if e.admitted != nil {
		e.admitted.Done(b.r.Context())
	}
	e.body.End() // safe on nil
	if e.inFlight {
		s.inFlight.Add(-1)
	}
}

// refusedUnread answers the calls refused before their body is read: one
// this edge forwarded already (a loop), not classified, or larger than the
// body bound says.
//
//go:noinline
func (s *Server) refusedUnread(w *call.Recorder, r *http.Request, problem wire.Problem) bool {
	if loop := s.forward.Loop(r); loop != nil {
		reqbody.Unwanted(w, r)
		call.Refuse(w, r, loop)
		return true
	}
	if problem != 0 || r.ContentLength > s.bodies.MaxBytes {
		// Refused before its body is bounded: nothing may wait for the body.
		reqbody.Unwanted(w, r)
	}
	switch problem {
	case wire.UnsupportedMediaType:
		apierror.WriteUnsupportedMediaType(w)
		return true
	case wire.MethodNotAllowed:
		apierror.WriteMethodNotAllowed(w)
		return true
	case wire.UnknownProcedure:
		call.Refuse(w, r, apierror.New(connect.CodeUnimplemented, "UNKNOWN_PROCEDURE", fmt.Sprintf("%s is not a procedure of this API", call.Clip(r.URL.Path))))
		return true
	}
	if r.ContentLength > s.bodies.MaxBytes {
		call.Refuse(w, r, reqbody.TooLarge(s.bodies.MaxBytes))
		return true
	}
	return false
}

// enter counts a unary call in flight; past max, it answers the call
// overloaded at once (before anything that costs) and returns false.
func (s *Server) enter(w *call.Recorder, r *http.Request, max int64) bool {
	if s.inFlight.Add(1) <= max {
		return true
	}
	s.inFlight.Add(-1)
	reqbody.Unwanted(w, r)
	call.Refuse(w, r, overloaded())
	return false
}

// admit authenticates the caller and applies the limits, under one policy
// for the whole call even if a reload swaps it meanwhile. A refused call is
// answered here, and its admission is nil (its principal is returned when
// the token was valid).
//
//go:noinline
func (s *Server) admit(w *call.Recorder, r *http.Request, c wire.Call, e *ending) (*identity.Principal, *policy.Rule, *limits.Admission) {
	pol := s.limits.Live()
	rule := pol.Table.Rule(c.Procedure)
	if rule.Open {
		// No token to check and no subject to limit or charge: the
		// call's bounds are the chain's others (docs/api.md, "Health").
		return nil, rule, &limits.Admission{}
	}
	p, refusal := s.authenticate(r, c, rule)
	if refusal != nil {
		call.Refuse(w, r, refusal)
		return p, rule, nil
	}
	ctx, span := s.tracing.Start(r.Context(), observe.SpanLimits)
	// A retry that will get a kept outcome skips the limits of running the
	// operation; Redis is asked only for the calls those limits concern.
	admit, replay := s.limits.Admit, rule.LimitsRunning() && s.idem.WillReplay(ctx, r, c, p.Subject, rule.Idempotent)
	if replay {
		admit = s.limits.AdmitReplay
	}
	if hold := s.limits.EarlyHold(c, p, rule, replay); hold.For > 0 && !s.hold(w, r, c, e, hold) {
		span.End()
		return p, rule, nil
	}
	admitted, refusal := admit(ctx, w, c, p, rule, pol)
	span.End()
	if refusal != nil {
		call.Refuse(w, r, refusal)
		return p, rule, nil
	}
	return p, rule, admitted
}

// hold holds a call that its limit would refuse again until the retry
// time the limit named (see early.Holds), and reports whether to go on and
// decide it; false when its client left meanwhile, or when the edge is
// past listen.max_calls_in_flight once the hold is over (then answered).
// A held call does not count in flight, and its body's clock stops: the
// hold is the edge's doing. The hold is part of the call's duration.
func (s *Server) hold(w *call.Recorder, r *http.Request, c wire.Call, e *ending, hold early.Hold) bool {
	if e.inFlight {
		s.inFlight.Add(-1)
		e.inFlight = false
	}
	e.body.Pause()
	start := time.Now()
	waited := hold.Wait(r.Context())
	w.AddHeld(time.Since(start))
	e.body.Resume()
	if !waited {
		return false
	}
	if max := int64(s.cfg.Listen.MaxCallsInFlight); max > 0 && !c.Streaming {
		e.inFlight = s.enter(w, r, max)
		return e.inFlight
	}
	return true
}

// callContext returns the admitted call's request as the next steps need
// it: its state (call.With) and its deadline.
//
//go:noinline
func (s *Server) callContext(b *begun, p *identity.Principal, rule *policy.Rule, admitted *limits.Admission, body *reqbody.Body) (*http.Request, context.CancelFunc) {
	w, r, c, start := b.rec, b.r, b.c, b.start
	if admitted.WatchesAnswer() {
		for _, h := range wire.CompressionHeaders {
			r.Header.Del(h)
		}
	}
	max := s.cfg.Requests.MaxUnaryTimeout
	if c.Streaming {
		max = s.cfg.Requests.MaxStreamTimeout
	}
	// The call's deadline runs from its arrival: the time spent in the edge
	// (authentication, limits, idempotency) is deducted from what the
	// backend gets (see proxy.WithDeadline).
	budget := proxy.Deadline(r, c, max)
	w.SetClientDeadline(budget < max)
	deadline := start.Add(budget)
	st := &call.State{Call: c, Rec: w, Admitted: admitted, Body: body, ReadOnly: rule.ReadOnly}
	if c.Streaming && p != nil && !p.Expiry.IsZero() {
		st.Expires = p.Expiry.Add(s.cfg.OIDC.ClockSkew)
	}
	ctx := proxy.WithDeadline(call.With(r.Context(), st), c, deadline)
	// A unary call ends at its deadline: the edge answers deadline_exceeded
	// itself if the backend has not answered. A stream's backend gets a
	// little grace to end it in the caller's protocol (its headers are
	// usually out already, so the edge could only cut it).
	if c.Streaming {
		deadline = deadline.Add(streamDeadlineGrace)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	return r.WithContext(ctx), cancel
}

// streamDeadlineGrace is how long past its deadline the edge lets the
// backend end a stream before cutting it.
const streamDeadlineGrace = time.Second

// authenticate authenticates the caller and authorizes it under rule, the
// call's, in a span of its own. It returns the refusal to answer, if any,
// and the principal when the token was valid.
func (s *Server) authenticate(r *http.Request, c wire.Call, rule *policy.Rule) (*identity.Principal, *connect.Error) {
	ctx, span := s.tracing.Start(r.Context(), observe.SpanAuthenticate)
	defer span.End()
	p, err := s.auth.AuthenticateRequest(ctx, r)
	if err != nil {
		refusal := authn.Refusal(err, c.UnaryConnect)
		if span.IsRecording() {
			span.SetAttributes(observe.AttrAuthOutcome.String(refusal.Code().String()), observe.AttrAuthReason.String(authn.Reason(err)))
		}
		return nil, refusal
	}
	if refusal := rule.Refusal(p, c.Procedure); refusal != nil {
		if span.IsRecording() {
			span.SetAttributes(observe.AttrAuthOutcome.String("permission_denied"), observe.AttrAuthReason.String(policy.ReasonMissingRole))
		}
		return p, refusal
	}
	if span.IsRecording() {
		span.SetAttributes(observe.AttrAuthOutcome.String("ok"))
	}
	return p, nil
}

// idempotency runs the idempotency step, in a span of its own when the
// call carries Idempotency-Key. The forwarded call's edge.upstream span is
// the step's child: the step forwards it.
func (s *Server) idempotency(w *call.Recorder, r *http.Request, c wire.Call, subject string, eligible, replayed bool) {
	if len(r.Header[idempotency.HeaderKey]) == 0 {
		outcome, _ := s.idem.Serve(w, r, c, subject, eligible, replayed, s.forward) // no key: no refusal
		s.metrics.Idempotency(outcome)
		return
	}
	ctx, span := s.tracing.Start(r.Context(), observe.SpanIdempotency)
	defer span.End()
	outcome, refusal := s.idem.Serve(w, r.WithContext(ctx), c, subject, eligible, replayed, s.forward)
	if refusal != nil {
		call.Refuse(w, r, refusal)
	}
	s.metrics.Idempotency(outcome)
	if outcome == idempotency.Unavailable {
		w.SetUnavailableReason(call.UnavailableIdempotency)
	}
	if span.IsRecording() {
		o := string(outcome)
		if o == "" {
			o = "ignored" // not a procedure that honors the key
		}
		span.SetAttributes(observe.AttrIdemOutcome.String(o))
	}
}
