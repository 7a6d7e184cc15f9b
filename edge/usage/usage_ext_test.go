package usage_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/usage"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// plan is the callers' plan: numbers no other plan has, so that an answer
// that shows them was read from this plan.
const plan = "usage-test"

var planLimits = config.Plan{RequestsPerMinute: 600, Burst: 50, RequestsPerDay: 5000,
	Quotas: config.Quotas{ConcurrentEnvironments: 3, EnvironmentsPerMonth: 7, VCPUHoursPerMonth: 40, MemoryGBHoursPerMonth: 80}}

// newLimits is a limit step on rdb, under keys of its own, with the plan
// above and limits.on_redis_failure fail_open (a call is admitted on the
// local share while Redis fails, and its usage cannot be read).
func newLimits(t *testing.T, rdb redis.UniversalClient) *limits.Step {
	t.Helper()
	return newLimitsOn(t, rdb, rdb)
}

// newLimitsOn is newLimits with the rate limiter's counters (the calls)
// on rates and the quotas' (the environments) on quotas.
func newLimitsOn(t *testing.T, rates, quotas redis.UniversalClient) *limits.Step {
	t.Helper()
	prefix := testenv.Unique("usage") + ":"
	cfg := config.Default()
	cfg.Limits.OnRedisFailure = config.FailOpen
	cfg.Limits.Plans[plan] = planLimits
	quiet := slog.New(slog.DiscardHandler) // an outage's warnings are expected here
	qo := quota.Options{KeyPrefix: prefix, Timeout: 5 * time.Second, LeasePeriod: time.Minute, Logger: quiet}
	return limits.New(policy.NewLive(cfg), limits.Options{
		Rates: ratelimit.New(rates, ratelimit.Options{Timeout: 5 * time.Second, KeyPrefix: prefix,
			OnRedisFailure: config.FailOpen, Logger: quiet}),
		Streams: quota.NewStreams(quotas, qo), Envs: quota.NewEnvironments(quotas, qo),
		OnRedisFailure: config.FailOpen, Log: quiet,
	})
}

// deadRedis is a client of an address where nothing listens: every
// command fails, connection refused (after the pool's few dial attempts),
// and is not retried.
func deadRedis(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testkit.DeadAddr(t), DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func caller() *identity.Principal {
	return &identity.Principal{Subject: testenv.Unique("subject"), Plan: plan}
}

// recorded is what the chain reads back from the call's Recorder once
// GetUsage was served: what it counts, traces and logs the call under.
type recorded struct {
	code, outcome, reason string
}

// edge is a TLS server (HTTP/2 and HTTP/1.1, so gRPC too) that stands for
// the edge's chain around the step, for calls of p: it classifies the
// call, records it, has the limit step admit it (GetUsage counts like any
// call), lets the step answer, and reports what the Recorder recorded.
type edge struct {
	*httptest.Server
	recorded chan recorded
}

func serve(t *testing.T, l *limits.Step, p *identity.Principal) *edge {
	t.Helper()
	procs := wire.Procedures{}
	for name, info := range config.Procedures() {
		procs[name] = info.Streaming()
	}
	step := usage.New(l)
	e := &edge{recorded: make(chan recorded, 1)}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, problem := wire.Classify(r, procs)
		if problem != 0 || c.Procedure != usage.Procedure {
			http.Error(w, "not GetUsage", http.StatusBadRequest)
			e.recorded <- recorded{code: "not classified as GetUsage"}
			return
		}
		rec := call.NewRecorder(w, c)
		pol := l.Live()
		a, refusal := l.Admit(r.Context(), rec, c, p, pol.Table.Rule(c.Procedure), pol)
		if refusal != nil {
			call.Refuse(rec, r, refusal)
			e.recorded <- recorded{code: "not admitted: " + refusal.Error()}
			return
		}
		step.Serve(rec, r, c, p, a)
		a.Done(context.WithoutCancel(r.Context()))
		code := rec.Result(c, r.Context().Err() != nil)
		e.recorded <- recorded{code: code, outcome: rec.Outcome(code), reason: rec.UnavailableReason()}
	}))
	e.EnableHTTP2 = true
	e.StartTLS()
	t.Cleanup(e.Close)
	return e
}

// admitted has the limit step admit n GetOrganization calls of p, as the
// chain would before forwarding them: the rate limiter counts them.
func admitted(t *testing.T, l *limits.Step, p *identity.Principal, n int) {
	t.Helper()
	c := wire.Call{Protocol: wire.Connect, Procedure: svcv1connect.OrganizationServiceGetOrganizationProcedure,
		Service: "svc.v1.OrganizationService", Method: "GetOrganization", UnaryConnect: true}
	pol := l.Live()
	for range n {
		a, refusal := l.Admit(t.Context(), httptest.NewRecorder(), c, p, pol.Table.Rule(c.Procedure), pol)
		if refusal != nil {
			t.Fatalf("GetOrganization not admitted: %v", refusal)
		}
		a.Done(t.Context())
	}
}

// wantUsage checks an answer against p's calls and the plan's numbers.
func wantUsage(t *testing.T, got *svcv1.GetUsageResponse, calls int32) {
	t.Helper()
	api, res := got.GetApiUsage(), got.GetResourceUsage()
	if api.GetRequestsToday() != calls || api.GetRequestsThisMonth() != calls {
		t.Errorf("requests today %d, this month %d; want %d each (GetUsage itself counts)", api.GetRequestsToday(), api.GetRequestsThisMonth(), calls)
	}
	if l := api.GetLimits(); l.GetRequestsPerMinute() != 600 || l.GetRequestsPerDay() != 5000 {
		t.Errorf("limits %v, want the plan's 600 a minute and 5000 a day", l)
	}
	if q := res.GetQuotas(); q.GetConcurrentEnvironments() != 3 || q.GetEnvironmentsPerMonth() != 7 ||
		q.GetVcpuHoursPerMonth() != 40 || q.GetMemoryGbHoursPerMonth() != 80 {
		t.Errorf("quotas %v, want the plan's 3 at once, 7 a month, 40 vCPU hours, 80 GB hours", q)
	}
	if res.GetEnvironments() != 0 || res.GetVcpuHours() != 0 || res.GetMemoryGbHours() != 0 {
		t.Errorf("resource usage %v, want none (the caller created no environment)", res)
	}
}

// getUsage is a POST of GetUsage to e with header and body.
func getUsage(t *testing.T, e *edge, header http.Header, body io.Reader) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+usage.Procedure, body)
	if err != nil {
		t.Fatal(err)
	}
	r.Header = header
	return r
}

// wantRecorded checks what the chain would count the call under.
func wantRecorded(t *testing.T, e *edge, want recorded) {
	t.Helper()
	if got := <-e.recorded; got != want {
		t.Errorf("recorded %+v, want %+v", got, want)
	}
}

// answeredByTheEdge is how a GetUsage the edge answered is recorded: its
// code, and the outcome of the edge's own answers (AnswersItself):
// answered, neither "error", which would say that no backend answered it,
// nor "refused".
var answeredByTheEdge = recorded{code: "ok", outcome: call.OutcomeAnswered, reason: call.UnavailableUpstream}

// TestGetUsageInJSONWithAnEmptyBodyAnswersTheCallsCountedAndThePlan: the
// specification's GetUsage has no body. A JSON caller that sends none
// (Content-Length 0), with or without a Content-Type, gets 200 and its
// usage in JSON: the calls the rate limiter admitted today and this month,
// GetUsage included, and its plan's limits and quotas.
func TestGetUsageInJSONWithAnEmptyBodyAnswersTheCallsCountedAndThePlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"Connect", http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}}},
		{"HTTP/JSON", http.Header{"Content-Type": {"application/json"}}},
		{"no Content-Type", http.Header{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, p := newLimits(t, testenv.Redis(t)), caller()
			e := serve(t, l, p)
			admitted(t, l, p, 4)

			res, body := testkit.Do(t, e.Client(), getUsage(t, e, tc.header, http.NoBody))
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s %s, want 200 application/json", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			var got svcv1.GetUsageResponse
			if err := protojson.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			wantUsage(t, &got, 5)
			wantRecorded(t, e, answeredByTheEdge)
		})
	}
}

// TestGetUsageInJSONWithAnEmptyBodyOfNoDeclaredLengthIsTheEmptyRequest: an
// empty body is the empty request whether its length was declared or not
// (docs/api.md): an HTTP/2 client that sends no content-length, an
// HTTP/1.1 one that sends it chunked, get their usage as a caller that
// sends Content-Length 0 does; and a body of no declared length is read
// whole ({} is the empty request too).
func TestGetUsageInJSONWithAnEmptyBodyOfNoDeclaredLengthIsTheEmptyRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		http1 bool
		body  string
	}{
		{"HTTP/2, empty", false, ""},
		{"HTTP/1.1 chunked, empty", true, ""},
		{"HTTP/2, {}", false, "{}"},
		{"HTTP/1.1 chunked, {}", true, "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, p := newLimits(t, testenv.Redis(t)), caller()
			e := serve(t, l, p)
			admitted(t, l, p, 1)

			// A reader of its own: the client knows no length of it.
			body := struct{ io.Reader }{strings.NewReader(tc.body)}
			r := getUsage(t, e, http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}}, body)
			client := e.Client()
			if tc.http1 {
				tr := client.Transport.(*http.Transport).Clone()
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetHTTP1(true)
				tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
				client = &http.Client{Transport: tr}
				r.TransferEncoding = []string{"chunked"}
			}
			res, got := testkit.Do(t, client, r)
			if res.StatusCode != http.StatusOK || res.ProtoMajor != map[bool]int{false: 2, true: 1}[tc.http1] {
				t.Fatalf("%s %d %s, want 200", res.Proto, res.StatusCode, got)
			}
			var u svcv1.GetUsageResponse
			if err := protojson.Unmarshal(got, &u); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			wantUsage(t, &u, 2)
			wantRecorded(t, e, answeredByTheEdge)
		})
	}
}

// protocols are the clients of every protocol connect-go speaks.
var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"Connect proto", nil},
	{"Connect JSON", []connect.ClientOption{connect.WithProtoJSON()}},
	// GetUsage has no side effects: a Connect client may ask it with GET.
	{"Connect GET", []connect.ClientOption{connect.WithHTTPGet()}},
	{"Connect GET JSON", []connect.ClientOption{connect.WithHTTPGet(), connect.WithProtoJSON()}},
	{"gRPC", []connect.ClientOption{connect.WithGRPC()}},
	{"gRPC-Web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// TestGetUsageIsAnsweredInEveryProtocol: a connect-go client of each
// protocol gets the same usage, and the call is recorded as answered.
func TestGetUsageIsAnsweredInEveryProtocol(t *testing.T) {
	t.Parallel()
	for _, protocol := range protocols {
		t.Run(protocol.name, func(t *testing.T) {
			t.Parallel()
			l, p := newLimits(t, testenv.Redis(t)), caller()
			e := serve(t, l, p)
			admitted(t, l, p, 2)
			client := svcv1connect.NewUsageServiceClient(e.Client(), e.URL, protocol.opts...)
			res, err := client.GetUsage(t.Context(), connect.NewRequest(&svcv1.GetUsageRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			wantUsage(t, res.Msg, 3)
			wantRecorded(t, e, answeredByTheEdge)
		})
	}
}

// TestGetUsageCountsTheEnvironmentsTheCallerRuns: an environment whose
// creation the backend confirmed is in the caller's usage, read from the
// quotas' counters, as is CreateEnvironment among its calls.
func TestGetUsageCountsTheEnvironmentsTheCallerRuns(t *testing.T) {
	t.Parallel()
	l, p := newLimits(t, testenv.Redis(t)), caller()
	e := serve(t, l, p)
	create := wire.Call{Protocol: wire.Connect, Procedure: svcv1connect.EnvironmentServiceCreateEnvironmentProcedure,
		Service: "svc.v1.EnvironmentService", Method: "CreateEnvironment", UnaryConnect: true}
	pol := l.Live()
	a, refusal := l.Admit(t.Context(), httptest.NewRecorder(), create, p, pol.Table.Rule(create.Procedure), pol)
	if refusal != nil {
		t.Fatalf("CreateEnvironment not admitted: %v", refusal)
	}
	// The backend's answer, as the forward step hands it to the limits.
	body, err := proto.Marshal(&svcv1.CreateEnvironmentResponse{Environment: &svcv1.Environment{
		Id: testenv.Unique("env"), CreatedAt: timestamppb.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/proto"}}}
	l.Answered(t.Context(), a, create, res, body, wire.OfResponse(create, res, body), nil)
	a.Done(t.Context())

	got, err := svcv1connect.NewUsageServiceClient(e.Client(), e.URL).GetUsage(t.Context(), connect.NewRequest(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := got.Msg.GetResourceUsage().GetEnvironments(); n != 1 {
		t.Errorf("environments %d, want the 1 created", n)
	}
	if n := got.Msg.GetApiUsage().GetRequestsToday(); n != 2 {
		t.Errorf("requests today %d, want 2 (CreateEnvironment, GetUsage)", n)
	}
	wantRecorded(t, e, answeredByTheEdge)
}

// TestGetUsageWithoutRedisIsUnavailableInTheAPIsErrorShape: while Redis is
// down, a call is admitted (fail_open, on the local share) but its usage
// cannot be read. A JSON caller, with an empty body or a Content-Type or
// neither, gets 503 and the error every other error of the API is: its
// ErrorInfo with "@type" and the message's fields, no connect-go "debug"
// copy. The call is recorded as unavailable because of the limits'
// dependency, as the edge counts and logs it.
func TestGetUsageWithoutRedisIsUnavailableInTheAPIsErrorShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
	}{
		{"Connect", http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}}, "{}"},
		{"HTTP/JSON, empty body", http.Header{"Content-Type": {"application/json"}}, ""},
		{"no Content-Type", http.Header{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := caller()
			e := serve(t, newLimits(t, deadRedis(t)), p)
			res, body := testkit.Do(t, e.Client(), getUsage(t, e, tc.header, strings.NewReader(tc.body)))
			if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s %s, want 503 application/json", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			if n := res.Header.Get("Content-Length"); n != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s, body of %d bytes", n, len(body))
			}
			var shape struct {
				Code    string           `json:"code"`
				Message string           `json:"message"`
				Details []map[string]any `json:"details"`
			}
			if err := json.Unmarshal(body, &shape); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if shape.Code != "unavailable" || shape.Message == "" || len(shape.Details) != 1 {
				t.Fatalf("%s, want code unavailable, a message and one detail", body)
			}
			d := shape.Details[0]
			for k, v := range map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "type": "google.rpc.ErrorInfo",
				"reason": limits.ReasonUnavailable, "domain": "edge"} {
				if d[k] != v {
					t.Errorf("detail's %s %v, want %v (%s)", k, d[k], v, body)
				}
			}
			if v, _ := d["value"].(string); v == "" {
				t.Errorf("detail without its Connect value: %s", body)
			}
			if _, ok := d["debug"]; ok {
				t.Errorf("detail keeps connect-go's debug copy: %s", body)
			}
			wantRecorded(t, e, recorded{code: "unavailable", outcome: call.OutcomeError, reason: call.UnavailableLimits})
		})
	}
}

// TestGetUsageWithoutRedisIsUnavailableInEveryProtocol: the callers of
// every protocol get unavailable with the limits' reason, and the call is
// recorded so, whatever the protocol carries its code in (gRPC's trailers
// after a 200).
func TestGetUsageWithoutRedisIsUnavailableInEveryProtocol(t *testing.T) {
	t.Parallel()
	for _, protocol := range protocols {
		t.Run(protocol.name, func(t *testing.T) {
			t.Parallel()
			p := caller()
			e := serve(t, newLimits(t, deadRedis(t)), p)
			client := svcv1connect.NewUsageServiceClient(e.Client(), e.URL, protocol.opts...)
			_, err := client.GetUsage(t.Context(), connect.NewRequest(&svcv1.GetUsageRequest{}))
			if connect.CodeOf(err) != connect.CodeUnavailable || testkit.Reason(err) != limits.ReasonUnavailable {
				t.Errorf("%v, want unavailable %s", err, limits.ReasonUnavailable)
			}
			wantRecorded(t, e, recorded{code: "unavailable", outcome: call.OutcomeError, reason: call.UnavailableLimits})
		})
	}
}

// TestGetUsageIsUnavailableWhenEitherOfItsCountsCannotBeRead: GetUsage
// answers all of its counts or none. In production both are in one Redis;
// here each is on a client of its own, so that one read fails alone, as
// when Redis fails between the call's admission and its answer.
func TestGetUsageIsUnavailableWhenEitherOfItsCountsCannotBeRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		calls, quotas func(testing.TB) redis.UniversalClient
	}{
		// Admitted on the local share: the calls are read from Redis.
		{"calls", deadRedis, testenv.Redis},
		// Admitted by Redis, whose decision has the calls: the
		// environments are read from Redis.
		{"environments", testenv.Redis, deadRedis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := caller()
			e := serve(t, newLimitsOn(t, tc.calls(t), tc.quotas(t)), p)
			client := svcv1connect.NewUsageServiceClient(e.Client(), e.URL, connect.WithProtoJSON())
			_, err := client.GetUsage(t.Context(), connect.NewRequest(&svcv1.GetUsageRequest{}))
			if connect.CodeOf(err) != connect.CodeUnavailable || testkit.Reason(err) != limits.ReasonUnavailable {
				t.Errorf("%v, want unavailable %s", err, limits.ReasonUnavailable)
			}
			wantRecorded(t, e, recorded{code: "unavailable", outcome: call.OutcomeError, reason: call.UnavailableLimits})
		})
	}
}
