// Package edge is the API edge's request chain: one http.Handler that
// classifies each call, bounds its body, authenticates and authorizes its
// caller, applies its limits and idempotency, and forwards it to the backend
// in the caller's own protocol, answering refusals in that protocol too.
// The steps live in the packages beside this one (docs/architecture.md);
// this package orders them and keeps what one call carries through them.
//
// It is not where the edge is built or started (edge/app), nor where what
// it counts is exported (edge/observe).
package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/result"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// Options are what the edge is made of.
type Options struct {
	Config     *config.Config
	Auth       *authn.Authenticator
	Procedures classify.Procedures
	Logger     *slog.Logger
	Metrics    *observe.Metrics // optional
	Limits     *limits.Step
	// Idempotency replays calls that carry Idempotency-Key; nil: off.
	Idempotency *idempotency.Step
	// TracerProvider makes the edge's spans; nil: the global provider
	// (otel.GetTracerProvider), a no-op unless the process set one up.
	TracerProvider trace.TracerProvider
}

// Server is the edge's API handler.
type Server struct {
	cfg     *config.Config
	auth    *authn.Authenticator
	procs   classify.Procedures
	proxy   http.Handler
	pool    *proxy.Pool
	log     *slog.Logger
	metrics *observe.Metrics
	limits  *limits.Step
	idem    *idempotency.Step
	usage   http.Handler
	bodies  reqbody.Options
	tracing observe.Tracing
}

// New assembles the chain.
func New(o Options) (*Server, error) {
	if o.Limits == nil {
		return nil, errors.New("edge: the limit step is required")
	}
	var ups []*url.URL
	for _, raw := range o.Config.Upstream.Backends() {
		up, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		ups = append(ups, up)
	}
	s := &Server{
		cfg:     o.Config,
		auth:    o.Auth,
		procs:   o.Procedures,
		log:     o.Logger,
		metrics: o.Metrics,
		limits:  o.Limits,
		idem:    o.Idempotency,
		bodies: reqbody.Options{MaxBytes: int64(o.Config.Requests.MaxBodyBytes),
			Timeout: o.Config.Requests.BodyTimeout, MessageTimeout: o.Config.Requests.StreamMessageTimeout},
		tracing: observe.NewTracing(o.TracerProvider),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.usage = o.Limits.UsageHandler()
	o.Metrics.Streaming(o.Procedures)
	uc := o.Config.Upstream
	s.pool = proxy.NewPool(proxy.PoolOptions{
		Upstreams: ups, DialTimeout: uc.DialTimeout, ResolveInterval: uc.ResolveInterval,
		MaxConnAge: uc.MaxConnectionAge, EjectFor: uc.EjectFor, Logger: s.log,
		// gRPC needs HTTP/2 for its trailers; a stream is long-lived, and
		// h2c carries it whatever its protocol.
		HTTP2: func(r *http.Request) bool {
			c := inflightOf(r).call
			return c.Protocol == classify.GRPC || c.Streaming
		},
	})
	s.proxy = proxy.New(proxy.Options{
		Upstream:       ups[0],
		Transport:      &upstreamTransport{next: s.pool, tracing: s.tracing, metrics: o.Metrics},
		Stream:         func(r *http.Request) bool { return inflightOf(r).call.Streaming },
		ModifyResponse: s.modifyResponse,
		ErrorHandler:   s.upstreamError,
	})
	return s, nil
}

// Close stops the upstream pool's background work and closes its idle
// connections.
func (s *Server) Close() { s.pool.Close() }

// Backends lists the upstream backends and the calls each got.
func (s *Server) Backends() []proxy.Backend { return s.pool.Backends() }

type callKey struct{}

// inflight is what a request carries through the proxy's hooks.
type inflight struct {
	call     classify.Call
	rec      *recorder
	admitted *limits.Admission
	expires  time.Time // a stream's end: its token's expiry plus the clock skew (expiry.go)
	// The request body's bounds, to tell a body the edge cut from a
	// backend failure.
	body *reqbody.Body
}

func inflightOf(r *http.Request) *inflight {
	f, _ := r.Context().Value(callKey{}).(*inflight)
	if f == nil {
		return &inflight{rec: &recorder{}}
	}
	return f
}

// ServeHTTP runs one call through the chain.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.metrics.Serving(1)
	defer s.metrics.Serving(-1)
	rec := &recorder{ResponseWriter: w}
	id := requestID(r.Header.Get("X-Request-Id"))
	r.Header.Set("X-Request-Id", id)
	w.Header().Set("X-Request-Id", id)

	call, problem := classify.Classify(r, s.procs)
	rec.frames = result.NewFrames(call)
	ctx, span := s.tracing.StartServer(r, call)
	defer span.End()
	r = r.WithContext(ctx)
	principal := s.serve(rec, r, call, problem, start)
	d := time.Since(start)
	code := rec.resultCode(call)
	if r.Context().Err() != nil && (rec.status == 0 || rec.cut.Load() || observe.ServerFault(code)) {
		// The client left before its answer was complete: not the
		// service's failure, and not a success either.
		code = "canceled"
	}
	outcome := rec.outcome(code)
	if outcome == observe.OutcomeForwarded {
		s.metrics.Overhead(call, d-time.Duration(rec.upstream.Load()))
	}
	if code == "deadline_exceeded" {
		origin := observe.DeadlineByEdge
		if rec.clientDeadline {
			origin = observe.DeadlineByClient
		}
		s.metrics.DeadlineExceeded(origin)
	}
	if code == "unavailable" {
		reason := rec.reason
		if reason == "" {
			reason = observe.UnavailableUpstream // the backend's own answer
		}
		s.metrics.Unavailable(reason)
	}
	observe.EndServer(span, call, code, rec.status)
	s.logCall(r, call, principal, rec, code, d)
	// Last, and edge_requests_total last within it: a scrape that counts
	// the call there finds it in every other series too, and its access
	// line written or queued (unless sampled out).
	s.metrics.Observe(call, code, outcome, d)
}

func (s *Server) serve(w *recorder, r *http.Request, call classify.Call, problem classify.Problem, start time.Time) *identity.Principal {
	if problem != 0 || r.ContentLength > s.bodies.MaxBytes {
		// Refused before its body is bounded: nothing may wait for the body.
		reqbody.Unwanted(w, r)
	}
	switch problem {
	case classify.UnsupportedMediaType:
		apierror.WriteUnsupportedMediaType(w)
		return nil
	case classify.MethodNotAllowed:
		apierror.WriteMethodNotAllowed(w)
		return nil
	case classify.UnknownProcedure:
		s.refuse(w, r, apierror.New(connect.CodeUnimplemented, "UNKNOWN_PROCEDURE", fmt.Sprintf("%s is not a procedure of this API", clip(r.URL.Path))))
		return nil
	}

	if r.ContentLength > s.bodies.MaxBytes {
		s.refuse(w, r, reqbody.TooLarge(s.bodies.MaxBytes))
		return nil
	}
	// Bound the body in time (from now: its headers are in) and in size.
	body := reqbody.Bound(w, r, call.Streaming, s.bodies)

	// One policy for the whole call, even if a reload swaps it meanwhile.
	pol := s.limits.Live()
	p, rule, refusal := s.authenticate(r, call, pol)
	if refusal != nil {
		s.refuse(w, r, refusal)
		return p
	}

	ctx, span := s.tracing.Start(r.Context(), observe.SpanLimits)
	admit := s.limits.Admit
	if s.replays(ctx, r, call, p, rule) {
		admit = s.limits.AdmitReplay
	}
	admitted, refusal := admit(ctx, w, call, p, rule, pol)
	span.End()
	if refusal != nil {
		s.refuse(w, r, refusal)
		return p
	}
	defer admitted.Done(r.Context())
	if call.Procedure == limits.UsageProcedure {
		s.serveUsage(w, r.WithContext(limits.WithUsageCaller(r.Context(), p, admitted)), call)
		return p
	}
	if call.Streaming {
		defer s.metrics.StreamOpened(call)()
	}
	if admitted.WatchesAnswer() {
		for _, h := range wire.CompressionHeaders {
			r.Header.Del(h)
		}
	}

	max := s.cfg.Requests.MaxUnaryTimeout
	if call.Streaming {
		max = s.cfg.Requests.MaxStreamTimeout
	}
	// The call's deadline runs from its arrival: the time spent in the edge
	// (authentication, limits, idempotency) is deducted from what the
	// backend gets (see proxy.WithDeadline).
	budget := proxy.Deadline(r, call, max)
	w.clientDeadline = budget < max
	deadline := start.Add(budget)
	f := &inflight{call: call, rec: w, admitted: admitted, body: body}
	if call.Streaming && !p.Expiry.IsZero() {
		f.expires = p.Expiry.Add(s.cfg.OIDC.ClockSkew)
	}
	ctx = proxy.WithDeadline(context.WithValue(r.Context(), callKey{}, f), deadline)
	// A unary call ends at its deadline: the edge answers deadline_exceeded
	// itself if the backend has not answered. A stream's backend gets a
	// little grace to end it in the caller's protocol (its headers are
	// usually out already, so the edge could only cut it).
	if call.Streaming {
		deadline = deadline.Add(streamDeadlineGrace)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r = r.WithContext(ctx)
	if s.idem != nil && !call.Streaming {
		next := s.proxy
		if admitted.Replayed() {
			next = replayGone{s}
		}
		s.idempotency(w, r, call, p.Subject, rule.Idempotent, next)
		return p
	}
	if call.Streaming {
		s.serveStream(w, r)
		return p
	}
	s.proxy.ServeHTTP(w, r)
	return p
}

// authenticate authenticates and authorizes the caller, in a span of its
// own. It returns the refusal to answer, if any, and the principal when the
// token was valid.
func (s *Server) authenticate(r *http.Request, call classify.Call, pol *limits.Live) (*identity.Principal, *policy.Rule, *connect.Error) {
	ctx, span := s.tracing.Start(r.Context(), observe.SpanAuthenticate)
	defer span.End()
	p, err := s.auth.AuthenticateRequest(ctx, r)
	if err != nil {
		refusal := authError(err, call)
		if span.IsRecording() {
			reason := identity.ReasonTokenInvalid
			if ie := (*identity.Error)(nil); errors.As(err, &ie) {
				reason = ie.Reason
			} else if _, ok := errors.AsType[*authn.FailureLimitError](err); ok {
				reason = authn.ReasonTooManyFailures
			}
			span.SetAttributes(observe.AttrAuthOutcome.String(refusal.Code().String()), observe.AttrAuthReason.String(reason))
		}
		return nil, nil, refusal
	}
	rule := pol.Table.Rule(call.Procedure)
	if !rule.Allows(p) {
		if span.IsRecording() {
			span.SetAttributes(observe.AttrAuthOutcome.String("permission_denied"), observe.AttrAuthReason.String("MISSING_ROLE"))
		}
		return p, rule, apierror.New(connect.CodePermissionDenied, "MISSING_ROLE",
			fmt.Sprintf("%s needs one of the roles %s", call.Procedure, strings.Join(rule.ServiceAccountRoles, ", ")),
			apierror.WithMetadata("required_roles", strings.Join(rule.ServiceAccountRoles, ",")))
	}
	if span.IsRecording() {
		span.SetAttributes(observe.AttrAuthOutcome.String("ok"))
	}
	return p, rule, nil
}

// idempotency runs the idempotency step, in a span of its own when the
// call carries Idempotency-Key. The forwarded call's edge.upstream span is
// the step's child: the step forwards it.
func (s *Server) idempotency(w http.ResponseWriter, r *http.Request, call classify.Call, subject string, eligible bool, next http.Handler) {
	if len(r.Header.Values(idempotency.HeaderKey)) == 0 {
		s.metrics.Idempotency(s.idem.Serve(w, r, call, subject, eligible, next))
		return
	}
	ctx, span := s.tracing.Start(r.Context(), observe.SpanIdempotency)
	defer span.End()
	outcome := s.idem.Serve(w, r.WithContext(ctx), call, subject, eligible, next)
	s.metrics.Idempotency(outcome)
	if outcome == idempotency.Unavailable {
		inflightOf(r).rec.reason = observe.UnavailableIdempotency
	}
	if span.IsRecording() {
		o := string(outcome)
		if o == "" {
			o = "ignored" // not a procedure that honors the key
		}
		span.SetAttributes(observe.AttrIdemOutcome.String(o))
	}
}

// replays reports whether the idempotency step will answer the call from a
// completed call's kept outcome (a retry with the same Idempotency-Key),
// so that the call's operation rate and quotas do not apply: the operation
// does not run again, and the retry must get the replay, not a refusal. It
// asks Redis only for the calls those limits concern.
func (s *Server) replays(ctx context.Context, r *http.Request, call classify.Call, p *identity.Principal, rule *policy.Rule) bool {
	if s.idem == nil || call.Streaming || !rule.Idempotent || rule.RatePerMinute == 0 && rule.Quota != config.QuotaReserveEnvironment {
		return false
	}
	if len(r.Header.Values(idempotency.HeaderKey)) == 0 {
		return false
	}
	done, err := s.idem.Completed(ctx, r, call, p.Subject)
	return err == nil && done
}

// replayGone stands in for the proxy on a call admitted as a replay: should
// the kept outcome have expired between the look and the replay, the call
// must not run without its quotas. Its answer (aborted) is not kept, so the
// retry runs through every limit.
type replayGone struct{ s *Server }

func (g replayGone) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.s.refuse(w, r, apierror.New(connect.CodeAborted, "IDEMPOTENCY_KEY_EXPIRED",
		"the kept outcome of this "+idempotency.HeaderKey+" expired meanwhile; retry the call", apierror.WithRetryAfter(time.Second)))
}

// refuse writes the edge's own error in the caller's protocol.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	rec, ok := w.(*recorder)
	if !ok { // behind another step's writer, e.g. idempotency's capture
		rec = inflightOf(r).rec
	}
	rec.code = err.Code().String()
	if err.Code() == connect.CodeUnavailable {
		rec.reason = unavailableReasonOf(err)
	}
	apierror.Write(w, r, err)
}

// unavailableReasonOf names the dependency behind one of the edge's own
// unavailable answers, from its ErrorInfo reason.
func unavailableReasonOf(err *connect.Error) string {
	for _, d := range err.Details() {
		v, _ := d.Value()
		if ei, ok := v.(*errdetails.ErrorInfo); ok {
			switch {
			case ei.Reason == limits.ReasonUnavailable:
				return observe.UnavailableLimits
			case ei.Reason == identity.ReasonIssuerUnavailable:
				return observe.UnavailableIssuer
			case strings.HasPrefix(ei.Reason, "IDEMPOTENCY"):
				return observe.UnavailableIdempotency
			}
		}
	}
	return observe.UnavailableUpstream
}

func authError(err error, call classify.Call) *connect.Error {
	if fl, ok := errors.AsType[*authn.FailureLimitError](err); ok {
		return apierror.New(connect.CodeResourceExhausted, authn.ReasonTooManyFailures,
			"too many failed authentications from this address: try again later with a valid token",
			apierror.WithRetryAfter(fl.RetryAfter))
	}
	var ie *identity.Error
	if !errors.As(err, &ie) {
		ie = &identity.Error{Reason: identity.ReasonTokenInvalid, Message: "invalid token"}
	}
	if ie.Reason == identity.ReasonIssuerUnavailable {
		return apierror.New(connect.CodeUnavailable, ie.Reason, ie.Message)
	}
	var opts []apierror.Option
	if call.UnaryConnect {
		opts = append(opts, apierror.WithHeader("WWW-Authenticate", `Bearer error="invalid_token"`))
	}
	return apierror.New(connect.CodeUnauthenticated, ie.Reason, ie.Message, opts...)
}

// errRequestBody ends a call whose body the edge cut, when the backend
// answered anyway: upstreamError answers it.
var errRequestBody = errors.New("request body cut by the edge")

// streamDeadlineGrace is how long past its deadline the edge lets the
// backend end a stream before cutting it.
const streamDeadlineGrace = time.Second

// maxErrorBody bounds the backend error bodies the edge rewrites.
const maxErrorBody = 64 << 10

// modifyResponse rewrites a Connect unary error, for JSON callers, into
// the specification's shape. Other protocols get the
// backend's bytes.
func (s *Server) modifyResponse(res *http.Response) error {
	f := inflightOf(res.Request)
	if f.body.Cut() {
		return errRequestBody // the backend answered a body cut short
	}
	if !f.expires.IsZero() && res.StatusCode == http.StatusOK {
		endAtExpiry(res, f)
	}
	if ids, more, ok := limits.EndedEnvironments(res.Header); ok {
		s.limits.Ended(res.Request.Context(), ids, more)
	}
	if f.admitted.WatchesAnswer() {
		body, err := limits.ReadAnswer(res)
		s.limits.Answered(res.Request.Context(), f.admitted, f.call, res, body, err)
	}
	if !f.call.UnaryConnect || res.StatusCode == http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody+1))
	if err != nil {
		return err
	}
	if len(body) > maxErrorBody {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
		return nil
	}
	_ = res.Body.Close()
	if f.call.JSON {
		if out, ok := apierror.RewriteJSON(body); ok {
			body = out
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// upstreamError answers a call the backend did not answer.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	f := inflightOf(r)
	switch {
	case f.body.Refusal(err) != nil:
		s.refuse(w, r, f.body.Refusal(err))
	case errors.Is(r.Context().Err(), context.DeadlineExceeded):
		s.refuse(w, r, apierror.New(connect.CodeDeadlineExceeded, "DEADLINE_EXCEEDED", "the backend did not answer in time"))
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client left; nobody reads an answer. Counted as canceled.
		inflightOf(r).rec.code = "canceled"
	default:
		s.log.WarnContext(r.Context(), "upstream unavailable", "procedure", inflightOf(r).call.Procedure, "err", err)
		s.refuse(w, r, apierror.New(connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "the backend is unavailable; retry later"))
	}
}

// requestID keeps a well-formed client request id, or makes one.
func requestID(in string) string {
	if wellFormedID(in) {
		return in
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// wellFormedID accepts 1-128 of A-Z a-z 0-9 - _ . : (a UUID, a ULID, a trace id).
func wellFormedID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
