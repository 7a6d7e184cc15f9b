package call_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
)

// recorded is what the chain reads back from a call's Recorder once the
// call has ended.
type recorded struct {
	result, outcome, reason string
	status                  int
}

// chain stands for the edge's chain around one fake next: it classifies
// the call, puts a Recorder in front of the client's writer and the call's
// state in its context, as the chain does before any step runs, and
// reports what the Recorder recorded once next has returned.
func chain(next http.Handler, results chan<- recorded) http.Handler {
	procs := wire.Procedures{}
	for name, info := range config.Procedures() {
		procs[name] = info.Streaming()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, problem := wire.Classify(r, procs)
		if problem != 0 {
			http.Error(w, "not classified", http.StatusBadRequest)
			return
		}
		rec := call.NewRecorder(w, c)
		next.ServeHTTP(rec, r.WithContext(call.With(r.Context(), &call.State{Call: c, Rec: rec})))
		code := rec.Result(c, r.Context().Err() != nil)
		results <- recorded{result: code, outcome: rec.Outcome(code), reason: rec.UnavailableReason(), status: rec.Status()}
	})
}

// backend answers GetOrganization and WatchEnvironment with err (nil: a
// whole answer), as the service behind the edge would; a stream sends one
// message before it ends.
type backend struct {
	svcv1connect.UnimplementedOrganizationServiceHandler
	svcv1connect.UnimplementedEnvironmentServiceHandler
	err error
}

func (b backend) GetOrganization(context.Context, *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	if b.err != nil {
		return nil, b.err
	}
	return connect.NewResponse(&svcv1.Organization{Id: "org-1"}), nil
}

func (b backend) WatchEnvironment(_ context.Context, _ *connect.Request[svcv1.WatchEnvironmentRequest], s *connect.ServerStream[svcv1.WatchEnvironmentResponse]) error {
	if err := s.Send(&svcv1.WatchEnvironmentResponse{}); err != nil {
		return err
	}
	return b.err
}

// answering is a fake next that answers as backend b does, marking the
// call answered as the proxy's transport would.
func answering(b backend) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewOrganizationServiceHandler(b))
	mux.Handle(svcv1connect.NewEnvironmentServiceHandler(b))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call.Of(r).Rec.Answered()
		mux.ServeHTTP(w, r)
	})
}

// refusing is a fake next that refuses every call with err.
func refusing(err *connect.Error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { call.Refuse(w, r, err) })
}

type protocol struct {
	name string
	opts []connect.ClientOption
	// plain: an HTTP/JSON call without Connect's header, as curl sends it.
	plain bool
}

var protocols = []protocol{
	{name: "connect+json", opts: []connect.ClientOption{connect.WithProtoJSON()}},
	{name: "connect+proto"},
	{name: "connect GET", opts: []connect.ClientOption{connect.WithHTTPGet()}},
	{name: "grpc", opts: []connect.ClientOption{connect.WithGRPC()}},
	{name: "grpc-web", opts: []connect.ClientOption{connect.WithGRPCWeb()}},
	{name: "grpc-web+json", opts: []connect.ClientOption{connect.WithGRPCWeb(), connect.WithProtoJSON()}},
	{name: "http/json", plain: true},
}

// server serves h over HTTP/2 (TLS, as gRPC needs).
func server(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// unary calls GetOrganization in p and returns the client's error.
func unary(t *testing.T, s *httptest.Server, p protocol) error {
	t.Helper()
	if p.plain {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.URL+svcv1connect.OrganizationServiceGetOrganizationProcedure, strings.NewReader(`{"organizationId":"org-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := s.Client().Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", res.StatusCode, body)
		}
		return nil
	}
	_, err := svcv1connect.NewOrganizationServiceClient(s.Client(), s.URL, p.opts...).
		GetOrganization(ctxT(t), connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: "org-1"}))
	return err
}

// stream calls WatchEnvironment in p, reads it to its end and returns its
// error.
func stream(t *testing.T, s *httptest.Server, p protocol) error {
	t.Helper()
	st, err := svcv1connect.NewEnvironmentServiceClient(s.Client(), s.URL, p.opts...).
		WatchEnvironment(ctxT(t), connect.NewRequest(&svcv1.WatchEnvironmentRequest{EnvironmentId: "env-1"}))
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
	}
	return st.Err()
}

func next(t *testing.T, results <-chan recorded) recorded {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the chain did not end the call")
		return recorded{}
	}
}

func TestTheRecordedCodeIsTheBackendsInEveryProtocol(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{connect.NewError(connect.CodeNotFound, errors.New("no such organization")), "not_found"},
		{connect.NewError(connect.CodePermissionDenied, errors.New("not a member")), "permission_denied"},
		{connect.NewError(connect.CodeFailedPrecondition, errors.New("not empty")), "failed_precondition"},
		{connect.NewError(connect.CodeUnavailable, errors.New("database down")), "unavailable"},
		{connect.NewError(connect.CodeInternal, errors.New("bug")), "internal"},
	} {
		results := make(chan recorded, 1)
		s := server(t, chain(answering(backend{err: tc.err}), results))
		for _, p := range protocols {
			t.Run(tc.want+"/"+p.name, func(t *testing.T) {
				err := unary(t, s, p)
				if (err == nil) != (tc.err == nil) {
					t.Fatalf("the client got %v, want %v", err, tc.err)
				}
				got := next(t, results)
				if got.result != tc.want || got.outcome != call.OutcomeForwarded {
					t.Fatalf("recorded %q (%s), want %q forwarded", got.result, got.outcome, tc.want)
				}
				if tc.want == "unavailable" && got.reason != call.UnavailableUpstream {
					t.Errorf("the backend's unavailable is about %q, want %q", got.reason, call.UnavailableUpstream)
				}
			})
		}
	}
}

func TestTheRecordedCodeOfAStreamIsItsEndsInEveryProtocol(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{connect.NewError(connect.CodeNotFound, errors.New("deleted")), "not_found"},
		{connect.NewError(connect.CodeDeadlineExceeded, errors.New("too long")), "deadline_exceeded"},
	} {
		results := make(chan recorded, 1)
		s := server(t, chain(answering(backend{err: tc.err}), results))
		for _, p := range protocols {
			if p.plain || p.name == "connect GET" {
				continue // no streams in HTTP/JSON nor over GET
			}
			t.Run(tc.want+"/"+p.name, func(t *testing.T) {
				if err := stream(t, s, p); connect.CodeOf(err) != connect.CodeOf(tc.err) && !(err == nil && tc.err == nil) {
					t.Fatalf("the client's stream ended %v, want %v", err, tc.err)
				}
				if got := next(t, results); got.result != tc.want {
					t.Fatalf("recorded %q, want %q (a message went out before the end)", got.result, tc.want)
				}
			})
		}
	}
}

func TestARefusalIsRecordedWithItsCodeAndWhatItIsAbout(t *testing.T) {
	for _, tc := range []struct {
		err     *connect.Error
		want    string
		outcome string
		reason  string
	}{
		{apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "slow down", apierror.WithRetryAfter(time.Second)), "resource_exhausted", call.OutcomeRefused, call.UnavailableUpstream},
		{apierror.New(connect.CodeUnauthenticated, "TOKEN_MISSING", "no token"), "unauthenticated", call.OutcomeRefused, call.UnavailableUpstream},
		{apierror.New(connect.CodePermissionDenied, "MISSING_ROLE", "no role"), "permission_denied", call.OutcomeRefused, call.UnavailableUpstream},
		{apierror.New(connect.CodeUnavailable, limits.ReasonUnavailable, "Redis down"), "unavailable", call.OutcomeError, call.UnavailableLimits},
		{apierror.New(connect.CodeUnavailable, identity.ReasonIssuerUnavailable, "issuer down"), "unavailable", call.OutcomeError, call.UnavailableIssuer},
		{apierror.New(connect.CodeUnavailable, call.ReasonOverloaded, "busy"), "unavailable", call.OutcomeError, call.UnavailableOverload},
		{apierror.New(connect.CodeUnavailable, call.ReasonShuttingDown, "bye"), "unavailable", call.OutcomeError, call.UnavailableShutdown},
		{apierror.New(connect.CodeUnavailable, "IDEMPOTENCY_UNAVAILABLE", "Redis down"), "unavailable", call.OutcomeError, call.UnavailableIdempotency},
	} {
		results := make(chan recorded, 1)
		s := server(t, chain(refusing(tc.err), results))
		for _, p := range protocols {
			t.Run(tc.want+"/"+p.name, func(t *testing.T) {
				if err := unary(t, s, p); err == nil {
					t.Fatal("the client got no error")
				} else if !p.plain && connect.CodeOf(err) != tc.err.Code() {
					t.Fatalf("the client got %v, want %v", err, tc.err.Code())
				}
				got := next(t, results)
				if got.result != tc.want || got.outcome != tc.outcome || got.reason != tc.reason {
					t.Fatalf("recorded %q, %s, about %s; want %q, %s, about %s", got.result, got.outcome, got.reason, tc.want, tc.outcome, tc.reason)
				}
			})
		}
	}
}

// wrapping is another step's writer in front of the Recorder (as the
// idempotency step's capture is): Refuse finds the Recorder by the call's
// state.
type wrapping struct{ http.ResponseWriter }

func TestARefusalBehindAnotherStepsWriterIsStillRecorded(t *testing.T) {
	results := make(chan recorded, 1)
	refuse := refusing(apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "slow down"))
	s := server(t, chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse.ServeHTTP(wrapping{w}, r)
	}), results))
	// gRPC-Web: the code is in a trailers frame of the body, which the
	// Recorder would read too; Refuse records it whatever the writer.
	if err := unary(t, s, protocols[4]); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("the client got %v", err)
	}
	if got := next(t, results); got.result != "resource_exhausted" || got.outcome != call.OutcomeRefused {
		t.Fatalf("recorded %q (%s), want resource_exhausted refused", got.result, got.outcome)
	}
}

func TestAnAnswerCutShortIsUnknown(t *testing.T) {
	results := make(chan recorded, 1)
	s := server(t, chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call.Of(r).Rec.Answered()
		w.Header().Set("Content-Type", "application/grpc-web+proto")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte{0, 0, 0, 0, 10, 1, 2}) // a message of 10 bytes, 2 sent, then nothing
	}), results))
	if err := unary(t, s, protocols[4]); err == nil {
		t.Fatal("the client got a whole answer")
	}
	if got := next(t, results); got.result != "unknown" {
		t.Fatalf("recorded %q, want unknown: no status reached the client", got.result)
	}
}

func TestAReplayIsRecordedWithTheStoredCode(t *testing.T) {
	rec := call.NewRecorder(httptest.NewRecorder(), wire.Call{Protocol: wire.Connect, UnaryConnect: true})
	rec.SetReplayedCode("failed_precondition")
	rec.WriteHeader(http.StatusBadRequest)
	c := wire.Call{Protocol: wire.Connect, UnaryConnect: true}
	if got := rec.Result(c, false); got != "failed_precondition" {
		t.Fatalf("Result %q, want the stored failed_precondition (400 alone would say invalid_argument)", got)
	}
	if got := rec.Outcome("failed_precondition"); got != call.OutcomeReplayed {
		t.Fatalf("Outcome %q, want replayed", got)
	}
	if got := rec.Outcome("canceled"); got != call.OutcomeError {
		t.Fatalf("a replay the client left: Outcome %q, want error", got)
	}
}

func TestTheStatusIsTheFirstThatWentOut(t *testing.T) {
	w := httptest.NewRecorder()
	rec := call.NewRecorder(w, wire.Call{Protocol: wire.HTTP, UnaryConnect: true, JSON: true})
	if rec.Status() != 0 {
		t.Fatalf("Status %d before anything went out", rec.Status())
	}
	rec.Flush()
	rec.WriteHeader(http.StatusTeapot)
	if rec.Status() != http.StatusOK {
		t.Fatalf("Status %d after a flush, want 200: a flush sends 200", rec.Status())
	}
	if rec.Unwrap() != w {
		t.Fatal("Unwrap does not reach the client's writer")
	}
}

func TestAConnectErrorBodyTooLargeToKeepIsJudgedByItsStatus(t *testing.T) {
	c := wire.Call{Protocol: wire.Connect, UnaryConnect: true, JSON: true}
	rec := call.NewRecorder(httptest.NewRecorder(), c)
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(http.StatusNotFound)
	_, _ = rec.Write([]byte(`{"code":"not_found","message":"` + strings.Repeat("x", call.MaxErrorBody) + `"}`))
	if got := rec.Result(c, false); got != "not_found" {
		t.Fatalf("Result %q, want not_found from the 404 alone", got)
	}
	rec = call.NewRecorder(httptest.NewRecorder(), c)
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(http.StatusBadRequest)
	_, _ = rec.Write([]byte(`{"code":"failed_precondition","message":"kept"}`))
	if got := rec.Result(c, false); got != "failed_precondition" {
		t.Fatalf("Result %q, want the body's failed_precondition", got)
	}
}

func TestTheDeadlineOriginSaysWhoseDeadlineRanOut(t *testing.T) {
	for _, tc := range []struct {
		streaming, clientDeadline, sent bool
		want                            string
	}{
		{false, false, false, call.DeadlineByEdge},
		{false, true, false, call.DeadlineByClient},
		{false, false, true, call.DeadlineInBackend},
		{false, true, true, call.DeadlineInBackend},
		{true, true, true, call.DeadlineByClient},
		{true, false, true, call.DeadlineInBackend},
	} {
		rec := call.NewRecorder(httptest.NewRecorder(), wire.Call{Protocol: wire.GRPC, Streaming: tc.streaming})
		rec.SetClientDeadline(tc.clientDeadline)
		if tc.sent {
			rec.Sent()
		}
		if got := rec.DeadlineOrigin(); got != tc.want {
			t.Errorf("streaming %v, client's deadline %v, sent %v: %q, want %q", tc.streaming, tc.clientDeadline, tc.sent, got, tc.want)
		}
	}
}

func TestTheEndAStepRecordsWinsOverWhatWentOut(t *testing.T) {
	c := wire.Call{Protocol: wire.GRPC, Streaming: true}
	rec := call.NewRecorder(httptest.NewRecorder(), c)
	rec.Header().Set("Grpc-Status", "0")
	rec.WriteHeader(http.StatusOK)
	rec.End(connect.NewError(connect.CodeDeadlineExceeded, errors.New("the client stopped reading")))
	if got := rec.Result(c, false); got != "deadline_exceeded" {
		t.Fatalf("Result %q, want the code of the end the step recorded", got)
	}
	if got := rec.Outcome("deadline_exceeded"); got != call.OutcomeError {
		t.Fatalf("Outcome %q, want %q: the edge could not serve the call", got, call.OutcomeError)
	}
	rec.SetUnavailableReason(call.UnavailableShutdown)
	if got := rec.UnavailableReason(); got != call.UnavailableShutdown {
		t.Fatalf("UnavailableReason %q", got)
	}
}

func TestOfPanicsOnARequestThatDidNotComeThroughTheChain(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Of returned for a request without call state")
		}
	}()
	call.Of(httptest.NewRequest(http.MethodPost, "/", nil))
}

func TestRequestIDKeepsAWellFormedIDAndMakesOneOtherwise(t *testing.T) {
	for _, id := range []string{"01J9Z8Q3B4", "4bf92f3577b34da6a3ce929d0e0e4736", "req:abc_1.2-3", strings.Repeat("a", 128)} {
		if got := call.RequestID(id); got != id {
			t.Errorf("RequestID(%q) = %q, want it kept", id, got)
		}
	}
	seen := map[string]bool{}
	for _, id := range []string{"", "has space", "quote\"", strings.Repeat("a", 129), "naïve", "a\nb"} {
		got := call.RequestID(id)
		if len(got) != 32 || strings.Trim(got, "0123456789abcdef") != "" || seen[got] {
			t.Errorf("RequestID(%q) = %q, want a fresh 32-hex-digit id", id, got)
		}
		seen[got] = true
	}
	if got := call.Clip(strings.Repeat("x", 200)); !strings.HasPrefix(got, strings.Repeat("x", 80)) || len(got) > 80+len("…") {
		t.Errorf("Clip: %d bytes", len(got))
	}
	if got := call.Clip("short"); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
}

func TestACallWhoseClientLeftIsCanceledUnlessItsAnswerWentOutWhole(t *testing.T) {
	c := wire.Call{Protocol: wire.GRPC}
	for _, tc := range []struct {
		name   string
		answer func(*call.Recorder)
		want   string
	}{
		{"nothing written", func(*call.Recorder) {}, "canceled"},
		{"the edge's refusal of a server fault", func(rec *call.Recorder) {
			rec.End(connect.NewError(connect.CodeUnavailable, errors.New("down")))
			rec.WriteHeader(http.StatusOK)
		}, "canceled"},
		{"a whole refusal of the caller", func(rec *call.Recorder) {
			rec.End(connect.NewError(connect.CodePermissionDenied, errors.New("no role")))
			rec.WriteHeader(http.StatusOK)
		}, "permission_denied"},
		{"a whole answer", func(rec *call.Recorder) {
			rec.Header().Set("Grpc-Status", "0")
			rec.WriteHeader(http.StatusOK)
		}, "ok"},
	} {
		rec := call.NewRecorder(httptest.NewRecorder(), c)
		tc.answer(rec)
		if got := rec.Result(c, true); got != tc.want {
			t.Errorf("%s, client gone: Result %q, want %q", tc.name, got, tc.want)
		}
	}
}
