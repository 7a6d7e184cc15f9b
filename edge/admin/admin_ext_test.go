package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	return do(t, http.MethodGet, url, header...)
}

// do sends one request with the headers given as name, value pairs
// ("Host" sets the request's Host) and returns the answer and its body.
func do(t *testing.T, method, url string, header ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, body := testkit.Do(t, http.DefaultClient, req)
	return res, string(body)
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func TestHealthzAnswersOKWhateverTheChecks(t *testing.T) {
	url := serve(t, admin.Probes(prometheus.NewRegistry(), admin.Check{Name: "redis", Func: func(context.Context) error { return errors.New("down") }}))
	if res, body := get(t, url+"/healthz"); res.StatusCode != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q, want 200 ok: the process is alive", res.StatusCode, body)
	}
}

func TestReadyzFollowsItsChecks(t *testing.T) {
	var redisDown, issuerDown atomic.Bool
	check := func(down *atomic.Bool, err string) func(context.Context) error {
		return func(context.Context) error {
			if down.Load() {
				return errors.New(err)
			}
			return nil
		}
	}
	url := serve(t, admin.Probes(prometheus.NewRegistry(),
		admin.Check{Name: "issuer", Func: check(&issuerDown, "discovery: 503")},
		admin.Check{Name: "redis", Func: check(&redisDown, "connection refused")}))

	if res, body := get(t, url+"/readyz"); res.StatusCode != http.StatusOK || body != "ok\n" {
		t.Fatalf("every check passes: %d %q, want 200 ok", res.StatusCode, body)
	}
	redisDown.Store(true)
	if res, body := get(t, url+"/readyz"); res.StatusCode != http.StatusServiceUnavailable || body != "redis: connection refused\n" {
		t.Fatalf("redis fails: %d %q, want 503 naming it", res.StatusCode, body)
	}
	issuerDown.Store(true)
	if res, body := get(t, url+"/readyz"); res.StatusCode != http.StatusServiceUnavailable || body != "issuer: discovery: 503\nredis: connection refused\n" {
		t.Fatalf("both fail: %d %q, want 503 naming both, one a line", res.StatusCode, body)
	}
	redisDown.Store(false)
	issuerDown.Store(false)
	if res, _ := get(t, url+"/readyz"); res.StatusCode != http.StatusOK {
		t.Fatalf("both back: %d, want 200", res.StatusCode)
	}
	if res, _ := do(t, http.MethodPost, url+"/readyz"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /readyz: %d, want 405", res.StatusCode)
	}
}

func TestACheckThatDoesNotAnswerFailsAtTheReadyTimeout(t *testing.T) {
	url := serve(t, admin.Probes(prometheus.NewRegistry(), admin.Check{Name: "redis", Func: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}))
	start := time.Now()
	res, body := get(t, url+"/readyz")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "redis: context deadline exceeded") {
		t.Fatalf("a hung check: %d %q, want 503 naming it", res.StatusCode, body)
	}
	if took := time.Since(start); took < admin.ReadyTimeout {
		t.Fatalf("answered after %v, before ReadyTimeout (%v)", took, admin.ReadyTimeout)
	}
}

func TestMetricsServesTheGatherersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_calls_total", Help: "Calls."})
	reg.MustRegister(c)
	c.Add(3)
	url := serve(t, admin.Probes(reg))
	res, body := get(t, url+"/metrics")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "test_calls_total 3") {
		t.Fatalf("/metrics: %d %q, want the registry's counter at 3", res.StatusCode, body)
	}
	res, body = get(t, url+"/metrics", "Accept", "application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/openmetrics-text") || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("OpenMetrics asked: Content-Type %q, want OpenMetrics", res.Header.Get("Content-Type"))
	}
}

// slowFree is the free plan refilled once a minute, so that what a test
// reads of it does not change while the test runs, however slowly.
func slowFree() config.Plan {
	p := config.Default().Limits.Plans["free"]
	p.RequestsPerMinute = 1
	return p
}

// operator is an admin listener with a real limit step (the real Redis)
// and a real authenticator (the development issuer's tokens).
type operator struct {
	url    string
	issuer string
	step   *limits.Step
	rates  *ratelimit.Limiter
	logs   *syncBuffer
}

type operatorOptions struct {
	addr   string
	settle admin.SettleFunc
	pprof  bool
	// failures bounds failed token verifications per client address.
	failures authn.FailureLimit
}

func startOperator(t *testing.T, o operatorOptions) *operator {
	t.Helper()
	issuer := testkit.SharedIssuer(t).URL()
	verifier, err := identity.NewVerifier(identity.Config{IssuerURL: issuer, Audience: devissuer.DefaultAudience, HTTPTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	prefix := testenv.Unique("admin") + ":"
	rates := ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second, KeyPrefix: prefix})
	qo := quota.Options{KeyPrefix: prefix, Timeout: 5 * time.Second, LeasePeriod: time.Minute}
	cfg := config.Default()
	cfg.Limits.Plans["free"] = slowFree()
	step := limits.New(policy.NewLive(cfg), limits.Options{
		Rates: rates, Streams: quota.NewStreams(rdb, qo), Envs: quota.NewEnvironments(rdb, qo),
		OnRedisFailure: config.FailClosed,
	})
	logs := &syncBuffer{}
	h := admin.New(admin.Options{
		Gatherer: prometheus.NewRegistry(),
		Limits:   step,
		Auth:     authn.New(verifier, authn.Options{FailureLimit: o.failures}),
		Log:      slog.New(slog.NewJSONHandler(logs, nil)),
		Addr:     o.addr,
		Settle:   o.settle,
		Pprof:    o.pprof,
	})
	return &operator{url: serve(t, h), issuer: issuer, step: step, rates: rates, logs: logs}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return v
}

func planLimit(t *testing.T, st admin.SubjectState) admin.LimitState {
	t.Helper()
	for _, l := range st.Limits {
		if l.Name == policy.PlanLimit {
			return l
		}
	}
	t.Fatalf("no plan limit in %+v", st.Limits)
	return admin.LimitState{}
}

var jsonBody = []string{"Content-Type", "application/json"}

func TestOnLoopbackAnOperatorInspectsAndResetsASubjectWithoutAToken(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "127.0.0.1:9090"})
	subject := testenv.Unique("customer")
	free := slowFree()
	req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: policy.PlanLimit, Rate: free.RequestsPerMinute, Period: time.Minute, Burst: free.Burst}}}
	for range 5 {
		if d, err := op.rates.Allow(context.Background(), req); err != nil || !d.Allowed {
			t.Fatalf("a call of the subject: %+v, %v", d, err)
		}
	}

	res, body := get(t, op.url+"/admin/v1/subjects/"+subject)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("inspect: %d %v %q", res.StatusCode, res.Header, body)
	}
	st := decode[admin.SubjectState](t, body)
	if st.Subject != subject || st.SubjectHash != identity.SubjectHash(subject) || st.Plan != "free" || st.PlanSource != "default_plan" {
		t.Errorf("inspect: subject %q hash %q plan %q (%s), want %q on the default plan free", st.Subject, st.SubjectHash, st.Plan, st.PlanSource, subject)
	}
	if l := planLimit(t, st); l.Burst != free.Burst || l.Remaining != free.Burst-5 {
		t.Errorf("plan limit %+v, want %d of a burst of %d left after 5 calls", l, free.Burst-5, free.Burst)
	}
	if q := st.Environments.Quotas; q.ConcurrentEnvironments != int(free.Quotas.ConcurrentEnvironments) {
		t.Errorf("quotas %+v, want the free plan's", q)
	}

	res, body = do(t, http.MethodPost, op.url+"/admin/v1/subjects/"+subject+"/reset-limits", jsonBody...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"plan"`) || !strings.Contains(body, `"`+ratelimit.DailyName+`"`) {
		t.Fatalf("reset-limits: %d %q, want 200 naming the limits reset", res.StatusCode, body)
	}
	_, body = get(t, op.url+"/admin/v1/subjects/"+subject)
	if l := planLimit(t, decode[admin.SubjectState](t, body)); l.Remaining != free.Burst {
		t.Errorf("after reset-limits: %d left, want the whole burst of %d", l.Remaining, free.Burst)
	}
	_, body = get(t, op.url+"/admin/v1/subjects/"+subject+"?plan=pro")
	if st := decode[admin.SubjectState](t, body); st.Plan != "pro" || st.PlanSource != "query" {
		t.Errorf("?plan=pro: plan %q (%s), want pro from the query", st.Plan, st.PlanSource)
	}
	if res, body := get(t, op.url+"/admin/v1/subjects/"+subject+"?plan=gold"); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `plan \"gold\" is not configured`) {
		t.Errorf("?plan=gold: %d %q, want 400", res.StatusCode, body)
	}

	logs := op.logs.String()
	for _, want := range []string{`"action":"inspect"`, `"action":"reset-limits"`, `"who":"loopback"`, `"subject":"` + subject + `"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("audit lines lack %s:\n%s", want, logs)
		}
	}
}

func TestReleaseStreamsEndsTheSubjectsLeases(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "127.0.0.1:9090"})
	subject := testenv.Unique("streamer")
	for range 2 {
		if _, err := op.step.Streams.Acquire(context.Background(), subject, 5); err != nil {
			t.Fatal(err)
		}
	}
	_, body := get(t, op.url+"/admin/v1/subjects/"+subject)
	st := decode[admin.SubjectState](t, body)
	if len(st.Streams) == 0 || st.Streams[0].Open != 2 {
		t.Fatalf("inspect streams %+v, want 2 open", st.Streams)
	}
	res, body := do(t, http.MethodPost, op.url+"/admin/v1/subjects/"+subject+"/release-streams", jsonBody...)
	if res.StatusCode != http.StatusOK || decode[map[string]int](t, body)["released"] != 2 {
		t.Fatalf("release-streams: %d %q, want 2 released", res.StatusCode, body)
	}
	if n, err := op.step.Streams.Open(context.Background(), subject); err != nil || n != 0 {
		t.Fatalf("after release-streams: %d open, %v", n, err)
	}
}

func TestSettleQuotaAnswersWhatSettleReturnsOr501WithoutIt(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "127.0.0.1:9090"})
	if res, _ := do(t, http.MethodPost, op.url+"/admin/v1/subjects/someone/settle-quota", jsonBody...); res.StatusCode != http.StatusNotImplemented {
		t.Fatalf("settle-quota without upstream.admin_url: %d, want 501", res.StatusCode)
	}
	var settled atomic.Value
	op = startOperator(t, operatorOptions{addr: "127.0.0.1:9090", settle: func(_ context.Context, subject string) (any, error) {
		settled.Store(subject)
		return map[string]int{"ended": 1}, nil
	}})
	res, body := do(t, http.MethodPost, op.url+"/admin/v1/subjects/someone/settle-quota", jsonBody...)
	if res.StatusCode != http.StatusOK || decode[map[string]int](t, body)["ended"] != 1 || settled.Load() != "someone" {
		t.Fatalf("settle-quota: %d %q (settled %v), want Settle's answer for someone", res.StatusCode, body, settled.Load())
	}
	op = startOperator(t, operatorOptions{addr: "127.0.0.1:9090", settle: func(context.Context, string) (any, error) {
		return nil, errors.New("backend: connection refused")
	}})
	res, body = do(t, http.MethodPost, op.url+"/admin/v1/subjects/someone/settle-quota", jsonBody...)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "backend: connection refused") {
		t.Fatalf("settle-quota failing: %d %q, want 503 with the error", res.StatusCode, body)
	}
}

func TestWhatAWebPageCouldSendIsRefused(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "127.0.0.1:9090"})
	reset := op.url + "/admin/v1/subjects/victim/reset-limits"
	for _, tc := range []struct {
		name   string
		method string
		url    string
		header []string
		status int
	}{
		{"any Origin", http.MethodGet, op.url + "/admin/v1/subjects/victim", []string{"Origin", "https://evil.example.net"}, http.StatusForbidden},
		{"a same-looking Origin", http.MethodPost, reset, []string{"Origin", "http://127.0.0.1:9090", "Content-Type", "application/json"}, http.StatusForbidden},
		{"a form POST", http.MethodPost, reset, []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"a text POST", http.MethodPost, reset, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"a POST without Content-Type", http.MethodPost, reset, nil, http.StatusUnsupportedMediaType},
		{"a rebound DNS name as Host", http.MethodGet, op.url + "/admin/v1/subjects/victim", []string{"Host", "evil.example.net:9090"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, tc.method, tc.url, tc.header...)
			if res.StatusCode != tc.status || !strings.Contains(body, `"error"`) {
				t.Fatalf("%d %q, want %d with an error", res.StatusCode, body, tc.status)
			}
		})
	}
	if !strings.Contains(op.logs.String(), `"msg":"admin action refused"`) {
		t.Errorf("no audit line of the refusals:\n%s", op.logs.String())
	}
	for _, host := range []string{"localhost:9090", "[::1]:9090", "127.0.0.1"} {
		if res, _ := get(t, op.url+"/admin/v1/subjects/victim", "Host", host); res.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200 (a loopback name)", host, res.StatusCode)
		}
	}
}

func TestOffLoopbackEveryOperatorCallNeedsAnAdminsToken(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "0.0.0.0:9090"})
	inspect := op.url + "/admin/v1/subjects/customer"
	if res, body := get(t, inspect); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "svc-admin") {
		t.Fatalf("no token: %d %q, want 401 naming the role", res.StatusCode, body)
	}
	viewer := testkit.Token(t, op.issuer, "svc-viewer")
	if res, body := get(t, inspect, "Authorization", "Bearer "+viewer); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "svc-admin") {
		t.Fatalf("svc-viewer's token: %d %q, want 403", res.StatusCode, body)
	}
	if res, _ := get(t, inspect, "Authorization", "Bearer not-a-token"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a malformed token: %d, want 401", res.StatusCode)
	}
	adminTok := testkit.Token(t, op.issuer, "svc-admin")
	if res, body := get(t, inspect, "Authorization", "Bearer "+adminTok, "Host", "edge-admin.internal:9090"); res.StatusCode != http.StatusOK {
		t.Fatalf("svc-admin's token under any Host: %d %q, want 200", res.StatusCode, body)
	}
	if res, _ := do(t, http.MethodPost, op.url+"/admin/v1/subjects/customer/reset-limits", "Authorization", "Bearer "+adminTok, "Content-Type", "application/json"); res.StatusCode != http.StatusOK {
		t.Fatalf("svc-admin resets: %d, want 200", res.StatusCode)
	}
	if res, _ := do(t, http.MethodPost, op.url+"/admin/v1/subjects/customer/reset-limits", "Authorization", "Bearer "+adminTok, "Origin", "https://evil.example.net", "Content-Type", "application/json"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("svc-admin's token from a web page: %d, want 403", res.StatusCode)
	}
	logs := op.logs.String()
	if !strings.Contains(logs, `"who":"service-account-svc-admin"`) {
		t.Errorf("the audit lines do not name the operator (svc-admin's service account):\n%s", logs)
	}
	for _, tok := range []string{viewer, adminTok} {
		if strings.Contains(logs, tok) {
			t.Fatal("a token is in the audit log")
		}
	}
}

func TestFailedTokensPastTheAddresssBoundAreRefusedWithRetryAfter(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "0.0.0.0:9090", failures: authn.FailureLimit{PerMinute: 1, Burst: 2}})
	inspect := op.url + "/admin/v1/subjects/customer"
	var last *http.Response
	for range 4 {
		last, _ = get(t, inspect, "Authorization", "Bearer not-a-token")
	}
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
		t.Fatalf("after 4 bad tokens with a burst of 2: %d, Retry-After %q; want 429 with Retry-After", last.StatusCode, last.Header.Get("Retry-After"))
	}
}

func TestASubjectPastItsBoundIsRefused(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "127.0.0.1:9090"})
	if res, body := get(t, op.url+"/admin/v1/subjects/"+strings.Repeat("s", 257)); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "1 to 256 bytes") {
		t.Fatalf("a 257-byte subject: %d %q, want 400", res.StatusCode, body)
	}
	if res, _ := get(t, op.url+"/admin/v1/subjects/"+strings.Repeat("s", 256)); res.StatusCode != http.StatusOK {
		t.Fatalf("a 256-byte subject: %d, want 200", res.StatusCode)
	}
}

func TestProfilesAreServedOnlyWhenAskedForAndBehindTheOperatorsGate(t *testing.T) {
	op := startOperator(t, operatorOptions{addr: "0.0.0.0:9090"})
	if res, _ := get(t, op.url+"/debug/pprof/"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without Pprof: %d, want 404", res.StatusCode)
	}
	op = startOperator(t, operatorOptions{addr: "0.0.0.0:9090", pprof: true})
	if res, _ := get(t, op.url+"/debug/pprof/"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/debug/pprof/ off loopback without a token: %d, want 401", res.StatusCode)
	}
	tok := testkit.Token(t, op.issuer, "svc-admin")
	if res, body := get(t, op.url+"/debug/pprof/", "Authorization", "Bearer "+tok); res.StatusCode != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with svc-admin's token: %d, want the index", res.StatusCode)
	}
	if res, _ := get(t, op.url+"/healthz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz beside the operator API: %d, want 200 without a token", res.StatusCode)
	}
}
