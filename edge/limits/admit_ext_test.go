package limits_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
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

// counts is an Observer that remembers what the step told it.
type counts struct {
	mu       sync.Mutex
	decided  map[string]int // "plan/limit/allowed"
	shadow   map[string]int // "plan/limit"
	reserved map[string]int
}

func newCounts() *counts {
	return &counts{decided: map[string]int{}, shadow: map[string]int{}, reserved: map[string]int{}}
}

func (c *counts) Decided(plan, limit string, allowed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decided[plan+"/"+limit+"/"+strconv.FormatBool(allowed)]++
}

func (c *counts) ShadowRefused(plan, limit string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shadow[plan+"/"+limit]++
}

func (c *counts) Reservation(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reserved[outcome]++
}

func (c *counts) LeaseHeld(float64)           {}
func (c *counts) UnreadableAnswer(string)     {}
func (c *counts) Reconciled(string, int, int) {}
func (c *counts) Refunded(string)             {}
func (c *counts) get(m map[string]int, k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[k]
}

// newStep is a limit step on the real Redis, under keys of its own, with
// cfg's plans (config.Default's, changed by change).
func newStep(t *testing.T, onFailure config.FailureMode, change func(*config.Limits)) (*limits.Step, *counts) {
	t.Helper()
	return newStepOn(t, testenv.Redis(t), onFailure, change)
}

func newStepOn(t *testing.T, rdb redis.UniversalClient, onFailure config.FailureMode, change func(*config.Limits)) (*limits.Step, *counts) {
	t.Helper()
	prefix := testenv.Unique("limits") + ":"
	cfg := config.Default()
	cfg.Limits.OnRedisFailure = onFailure
	if change != nil {
		change(&cfg.Limits)
	}
	obs := newCounts()
	qo := quota.Options{KeyPrefix: prefix, Timeout: 5 * time.Second, LeasePeriod: time.Minute}
	step := limits.New(policy.NewLive(cfg), limits.Options{
		Rates:   ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second, KeyPrefix: prefix, OnRedisFailure: onFailure}),
		Streams: quota.NewStreams(rdb, qo), Envs: quota.NewEnvironments(rdb, qo),
		OnRedisFailure: onFailure, Observer: obs,
	})
	return step, obs
}

func withPlan(name string, p config.Plan) func(*config.Limits) {
	return func(l *config.Limits) {
		l.Plans[name] = p
	}
}

var getOrganization = wire.Call{Protocol: wire.Connect, Procedure: svcv1connect.OrganizationServiceGetOrganizationProcedure,
	Service: "svc.v1.OrganizationService", Method: "GetOrganization", UnaryConnect: true}

func principal(plan string) *identity.Principal {
	return &identity.Principal{Subject: testenv.Unique("subject"), Plan: plan}
}

// admit runs one call's admission and returns the headers it wrote.
func admit(t *testing.T, l *limits.Step, c wire.Call, p *identity.Principal, rule *policy.Rule) (*limits.Admission, *connect.Error, http.Header) {
	t.Helper()
	w := httptest.NewRecorder()
	a, refusal := l.Admit(t.Context(), w, c, p, rule, l.Live())
	return a, refusal, w.Header()
}

func reasonOf(err *connect.Error) string {
	for _, d := range err.Details() {
		if v, _ := d.Value(); v != nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ei.Reason
			}
		}
	}
	return ""
}

// asSeen writes the refusal as the chain would to a plain HTTP/JSON
// caller, and returns what the caller gets.
func asSeen(t *testing.T, err *connect.Error) *http.Response {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, getOrganization.Procedure, nil)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	apierror.Write(w, r, err)
	return w.Result()
}

func TestAPlansBurstThenARefusalWithRetryAfterAndItsReason(t *testing.T) {
	l, obs := newStep(t, config.FailOpen, withPlan("tiny", config.Plan{RequestsPerMinute: 1, Burst: 2, RequestsPerDay: 1000}))
	p := principal("tiny")
	rule := &policy.Rule{}
	for i := range 2 {
		a, refusal, h := admit(t, l, getOrganization, p, rule)
		if refusal != nil || a == nil {
			t.Fatalf("call %d within the burst: refused %v", i+1, refusal)
		}
		a.Done(t.Context())
		if got, want := h.Get("X-RateLimit-Remaining"), strconv.Itoa(1-i); got != want {
			t.Errorf("call %d: X-RateLimit-Remaining %q, want %s", i+1, got, want)
		}
		if h.Get("X-RateLimit-Limit") != "2" || !strings.Contains(h.Get("RateLimit-Policy"), `"plan";q=2`) {
			t.Errorf("call %d: X-RateLimit-Limit %q, RateLimit-Policy %q; want the plan's burst of 2", i+1, h.Get("X-RateLimit-Limit"), h.Get("RateLimit-Policy"))
		}
	}
	a, refusal, h := admit(t, l, getOrganization, p, rule)
	if a != nil || refusal == nil {
		t.Fatal("the third call past a burst of 2 was admitted")
	}
	if refusal.Code() != connect.CodeResourceExhausted || reasonOf(refusal) != "RATE_LIMIT_EXCEEDED" || !strings.Contains(refusal.Message(), "tiny plan") {
		t.Fatalf("refusal %v (reason %s), want resource_exhausted RATE_LIMIT_EXCEEDED naming the tiny plan", refusal, reasonOf(refusal))
	}
	if h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("refused: X-RateLimit-Remaining %q, want 0", h.Get("X-RateLimit-Remaining"))
	}
	res := asSeen(t, refusal)
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); res.StatusCode != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 60 {
		t.Fatalf("the caller sees %d, Retry-After %q; want 429 and the seconds until a token (1 a minute: 60 at most)", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if got := obs.get(obs.decided, "tiny/plan/false"); got != 1 {
		t.Errorf("refusals counted under tiny/plan: %d, want 1", got)
	}
	if got := obs.get(obs.decided, "tiny/rate/true"); got != 2 {
		t.Errorf("admissions counted under tiny/rate: %d, want 2", got)
	}
	// Another subject of the same plan has a bucket of its own.
	if _, refusal, _ := admit(t, l, getOrganization, principal("tiny"), rule); refusal != nil {
		t.Fatalf("another subject: %v", refusal)
	}
}

func TestADailyCapRefusesWithItsOwnReason(t *testing.T) {
	l, _ := newStep(t, config.FailOpen, withPlan("daily", config.Plan{RequestsPerMinute: 600, Burst: 100, RequestsPerDay: 2}))
	p := principal("daily")
	for range 2 {
		if _, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{}); refusal != nil {
			t.Fatal(refusal)
		}
	}
	_, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{})
	if refusal == nil || reasonOf(refusal) != "DAILY_LIMIT_EXCEEDED" || refusal.Meta().Get("Retry-After") == "" {
		t.Fatalf("the third call of a day capped at 2: %v, want DAILY_LIMIT_EXCEEDED with Retry-After", refusal)
	}
}

func TestAnOperationsRateRefusesThatOperationOnly(t *testing.T) {
	l, _ := newStep(t, config.FailOpen, nil)
	p := principal("pro")
	create := wire.Call{Protocol: wire.GRPC, Procedure: svcv1connect.OrganizationServiceCreateOrganizationProcedure,
		Service: "svc.v1.OrganizationService", Method: "CreateOrganization"}
	rule := &policy.Rule{Operation: config.Operation{Procedure: create.Procedure, RatePerMinute: 1}}
	if _, refusal, _ := admit(t, l, create, p, rule); refusal != nil {
		t.Fatal(refusal)
	}
	_, refusal, h := admit(t, l, create, p, rule)
	if refusal == nil || reasonOf(refusal) != "OPERATION_RATE_EXCEEDED" || !strings.Contains(refusal.Message(), "CreateOrganization") {
		t.Fatalf("a second CreateOrganization at 1 a minute: %v, want OPERATION_RATE_EXCEEDED naming it", refusal)
	}
	if !strings.Contains(h.Get("RateLimit-Policy"), `"op:CreateOrganization";q=1`) {
		t.Errorf("RateLimit-Policy %q lacks the operation's limit", h.Get("RateLimit-Policy"))
	}
	if _, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{}); refusal != nil {
		t.Fatalf("another operation of the same subject: %v, want it admitted", refusal)
	}
}

func TestAShadowPlanAdmitsWhatItWouldRefuseAndCountsIt(t *testing.T) {
	l, obs := newStep(t, config.FailOpen, withPlan("trial", config.Plan{RequestsPerMinute: 1, Burst: 1, RequestsPerDay: 1000, Shadow: true}))
	p := principal("trial")
	for i := range 3 {
		a, refusal, h := admit(t, l, getOrganization, p, &policy.Rule{})
		if refusal != nil || a == nil {
			t.Fatalf("call %d under a shadow plan: refused %v", i+1, refusal)
		}
		if i > 0 && h.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("call %d: X-RateLimit-Remaining %q, want 0: the headers say what enforcing would", i+1, h.Get("X-RateLimit-Remaining"))
		}
	}
	if got := obs.get(obs.shadow, "trial/plan"); got != 2 {
		t.Fatalf("shadow refusals counted: %d, want 2 (calls 2 and 3)", got)
	}
}

func TestTheStreamCapRefusesUntilAStreamEnds(t *testing.T) {
	l, _ := newStep(t, config.FailOpen, nil)
	p := principal("pro")
	watch := wire.Call{Protocol: wire.GRPC, Procedure: svcv1connect.EnvironmentServiceWatchEnvironmentProcedure,
		Service: "svc.v1.EnvironmentService", Method: "WatchEnvironment", Streaming: true}
	rule := &policy.Rule{Operation: config.Operation{Procedure: watch.Procedure, ConcurrentStreams: 1}}
	first, refusal, _ := admit(t, l, watch, p, rule)
	if refusal != nil {
		t.Fatal(refusal)
	}
	_, refusal, h := admit(t, l, watch, p, rule)
	if refusal == nil || refusal.Code() != connect.CodeResourceExhausted || reasonOf(refusal) != quota.ReasonStreamLimit {
		t.Fatalf("a second stream with a cap of 1: %v, want %s", refusal, quota.ReasonStreamLimit)
	}
	if h.Get("X-RateLimit-Limit") != "1" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("headers %v, want the cap of 1 with none left", h)
	}
	first.Done(t.Context())
	if _, refusal, _ := admit(t, l, watch, p, rule); refusal != nil {
		t.Fatalf("after the first stream ended: %v", refusal)
	}
}

// createdAnswer is the backend's answer to CreateEnvironment in Connect's
// binary form.
func createdAnswer(t *testing.T, id string) (*http.Response, []byte) {
	t.Helper()
	body, err := proto.Marshal(&svcv1.CreateEnvironmentResponse{Environment: &svcv1.Environment{Id: id, CreatedAt: timestamppb.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/proto"}}}, body
}

func TestTheEnvironmentQuotaIsHeldByAnswersAndGivenBackByFailures(t *testing.T) {
	l, obs := newStep(t, config.FailOpen, withPlan("one", config.Plan{RequestsPerMinute: 600, Burst: 100, RequestsPerDay: 1000,
		Quotas: config.Quotas{ConcurrentEnvironments: 1}}))
	p := principal("one")
	create := wire.Call{Protocol: wire.Connect, Procedure: svcv1connect.EnvironmentServiceCreateEnvironmentProcedure,
		Service: "svc.v1.EnvironmentService", Method: "CreateEnvironment", UnaryConnect: true}
	rule := &policy.Rule{Operation: config.Operation{Procedure: create.Procedure, Quota: config.QuotaReserveEnvironment}}

	// A call the backend failed gives its slot back.
	a, refusal, _ := admit(t, l, create, p, rule)
	if refusal != nil || !a.WatchesAnswer() {
		t.Fatalf("first CreateEnvironment: %v (watches its answer: %v)", refusal, a.WatchesAnswer())
	}
	a.Done(t.Context())
	if obs.get(obs.reserved, limits.ReservationRolledBack) != 1 {
		t.Fatalf("reservations %v, want one rolled back", obs.reserved)
	}

	// A created environment holds it.
	a, refusal, _ = admit(t, l, create, p, rule)
	if refusal != nil {
		t.Fatalf("after the rollback: %v, want the slot free again", refusal)
	}
	res, body := createdAnswer(t, testenv.Unique("env"))
	l.Answered(t.Context(), a, create, res, body, wire.OfResponse(create, res, body), nil)
	a.Done(t.Context())
	if obs.get(obs.reserved, limits.ReservationConfirmed) != 1 {
		t.Fatalf("reservations %v, want one confirmed", obs.reserved)
	}
	_, refusal, h := admit(t, l, create, p, rule)
	if refusal == nil || refusal.Code() != connect.CodeResourceExhausted {
		t.Fatalf("a second environment with a quota of 1: %v, want resource_exhausted", refusal)
	}
	if !strings.HasPrefix(h.Get("RateLimit-Policy"), `"concurrent_environments";q=1`) {
		t.Errorf("RateLimit-Policy %q, want the quota's", h.Get("RateLimit-Policy"))
	}
	// Reads are not charged to the quota.
	if _, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{}); refusal != nil {
		t.Fatalf("a read of a subject at its quota: %v", refusal)
	}
}

func TestWithoutRedisFailClosedRefusesUnavailableAndFailOpenAdmits(t *testing.T) {
	dead := testkit.DeadAddr(t)
	for _, tc := range []struct {
		mode  config.FailureMode
		admit bool
	}{{config.FailClosed, false}, {config.FailOpen, true}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			rdb := newClient(t, dead)
			l, _ := newStepOn(t, rdb, tc.mode, nil)
			a, refusal, _ := admit(t, l, getOrganization, principal("free"), &policy.Rule{})
			if tc.admit {
				if refusal != nil || a == nil {
					t.Fatalf("fail_open without Redis: %v, want admitted on the local share", refusal)
				}
				return
			}
			if refusal == nil || refusal.Code() != connect.CodeUnavailable || reasonOf(refusal) != limits.ReasonUnavailable {
				t.Fatalf("fail_closed without Redis: %v, want unavailable %s", refusal, limits.ReasonUnavailable)
			}
		})
	}
}

func TestGetUsageAnswersWhatTheSubjectUsedAndItsPlansLimits(t *testing.T) {
	l, _ := newStep(t, config.FailOpen, withPlan("tiny", config.Plan{RequestsPerMinute: 60, Burst: 10, RequestsPerDay: 500,
		Quotas: config.Quotas{ConcurrentEnvironments: 3, EnvironmentsPerMonth: 7}}))
	p := principal("tiny")
	for range 2 {
		if _, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{}); refusal != nil {
			t.Fatal(refusal)
		}
	}
	getUsage := wire.Call{Protocol: wire.Connect, Procedure: usage.Procedure, Service: "svc.v1.UsageService", Method: "GetUsage", UnaryConnect: true}
	a, refusal, _ := admit(t, l, getUsage, p, &policy.Rule{})
	if refusal != nil {
		t.Fatal(refusal)
	}
	step := usage.New(l)
	codes := make(chan string, 1)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := call.NewRecorder(w, getUsage)
		step.Serve(rec, r, getUsage, p, a)
		codes <- rec.Result(getUsage, false)
	}))
	t.Cleanup(s.Close)
	res, err := svcv1connect.NewUsageServiceClient(s.Client(), s.URL).GetUsage(t.Context(), connect.NewRequest(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	api, quotas := res.Msg.GetApiUsage(), res.Msg.GetResourceUsage().GetQuotas()
	if api.GetRequestsToday() != 3 || api.GetRequestsThisMonth() != 3 {
		t.Errorf("requests today %d, this month %d; want 3 each (GetUsage itself counts)", api.GetRequestsToday(), api.GetRequestsThisMonth())
	}
	if api.GetLimits().GetRequestsPerMinute() != 60 || api.GetLimits().GetRequestsPerDay() != 500 {
		t.Errorf("limits %v, want the tiny plan's 60 a minute and 500 a day", api.GetLimits())
	}
	if quotas.GetConcurrentEnvironments() != 3 || quotas.GetEnvironmentsPerMonth() != 7 || quotas.GetVcpuHoursPerMonth() != 0 {
		t.Errorf("quotas %v, want 3 at once, 7 a month, no compute quota (0)", quotas)
	}
	if code := <-codes; code != "ok" {
		t.Errorf("the call recorded as %q, want ok", code)
	}
}

func TestABuiltinProcedureHasItsOwnRateNotThePlans(t *testing.T) {
	l, _ := newStep(t, config.FailOpen, withPlan("tiny", config.Plan{RequestsPerMinute: 1, Burst: 1, RequestsPerDay: 1000}))
	p := principal("tiny")
	reflect := wire.Call{Protocol: wire.GRPC, Procedure: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		Service: "grpc.reflection.v1.ServerReflection", Method: "ServerReflectionInfo", Streaming: true}
	rule := l.Live().Table.Rule(reflect.Procedure)
	if !rule.Builtin {
		t.Fatalf("reflection's rule is not builtin: %+v", rule)
	}
	var refusal *connect.Error
	admitted := 0
	// The burst, and a few more should the machine be so slow that a
	// call's token refilled meanwhile (one a second).
	for range limits.BuiltinBurst + 10 {
		var a *limits.Admission
		if a, refusal, _ = admit(t, l, reflect, p, rule); refusal != nil {
			break
		}
		a.Done(context.Background())
		admitted++
	}
	if admitted < limits.BuiltinBurst || refusal == nil || reasonOf(refusal) != limits.ReasonBuiltinRate {
		t.Fatalf("%d reflection calls admitted, then %v; want at least %d, then %s", admitted, refusal, limits.BuiltinBurst, limits.ReasonBuiltinRate)
	}
	if _, refusal, _ := admit(t, l, getOrganization, p, &policy.Rule{}); refusal != nil {
		t.Fatalf("the plan's one call after %d reflection calls: %v, want admitted (reflection is not charged to the plan)", admitted, refusal)
	}
}

// newClient is a client of addr that gives up quickly: where nothing
// listens, every command fails at once.
func newClient(t *testing.T, addr string) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
