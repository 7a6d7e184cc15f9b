package edge_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// dashboardStack is an edge in front of two real backends, the second
// behind a proxy that can refuse its connections (as when it is killed),
// checking them every second, with its log kept.
type dashboardStack struct {
	edge   *testkit.Edge
	second *testkit.FaultProxy
	log    *logBuffer
	token  func(string) string
}

func startDashboardStack(t *testing.T, change func(*config.Config)) *dashboardStack {
	t.Helper()
	iss := testkit.SharedIssuer(t)
	first := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	second := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	fp := testkit.StartFaultProxy(t, strings.TrimPrefix(second.URL, "http://"))
	cfg := testkit.EdgeConfig(t, first.URL, iss.URL())
	cfg.Upstream.URLs = []string{first.URL, "http://" + fp.Addr}
	cfg.Upstream.HealthCheck.Interval, cfg.Upstream.HealthCheck.Timeout = time.Second, time.Second
	cfg.Upstream.HealthCheck.UnhealthyThreshold = 1
	cfg.Limits.Plans = map[string]config.Plan{
		"free":   {RequestsPerMinute: 1, Burst: 1, RequestsPerDay: 100},
		"silver": {RequestsPerMinute: 321, Burst: 17, RequestsPerDay: config.Unlimited, Shadow: true},
	}
	cfg.Limits.DefaultPlan = "free"
	if change != nil {
		change(cfg)
	}
	log := &logBuffer{}
	e := testkit.StartEdgeWith(t, cfg, testkit.EdgeOptions{Logger: testkit.Logger(log, "json", slog.LevelInfo)})
	return &dashboardStack{edge: e, second: fp, log: log, token: func(who string) string { return testkit.Token(t, iss.URL(), who) }}
}

// An operator opens the page on the loopback admin listener: it shows the
// plans in force, a backend killed meanwhile turns to ejected, the subject
// the test has refused is among the most refused, its lookup shows the
// refusing limit with no call left and when it is full again, and its
// limits are reset only once the reset is confirmed, with an audit line.
func TestOperatorPageShowsPolicyBackendsAndRefusedSubjectsAndResetsOneAfterConfirmation(t *testing.T) {
	t.Parallel()
	s := startDashboardStack(t, nil)
	page := testkit.StartChromium(t).NewPage(nil)
	page.Navigate(s.edge.AdminURL + "/dashboard/")

	plans := page.WaitText("#plans", "the running config's plans", func(text string) bool {
		return strings.Contains(text, "silver") && strings.Contains(text, "free")
	})
	for _, want := range []string{"321", "SHADOW", "default plan", "enforced"} {
		if !strings.Contains(plans, want) {
			t.Errorf("the plans table lacks %q:\n%s", want, plans)
		}
	}
	page.WaitText("#backends tbody", "both backends healthy", func(text string) bool {
		return strings.Count(text, "healthy") == 2
	})

	tok := s.token("free-dashboard-refused")
	sub := subjectOf(t, tok)
	if res, _ := jsonCallWith(t, testkit.HTTP1Client, http.Header{"Idempotency-Key": {"dashboard-1"}}, s.edge.URL, tok,
		"/svc.v1.OrganizationService/CreateOrganization", `{"name":"dashboard-org","billingEmail":"billing@dashboard.example"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d", res.StatusCode)
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call: %d, want 429 (burst 1)", res.StatusCode)
	}
	page.WaitText("#most-refused tbody", "the refused subject among the most refused", func(text string) bool {
		return strings.Contains(text, sub) && strings.Contains(text, "plan")
	})
	page.WaitText("#refusals tbody", "the refusal counted by plan and limit", func(text string) bool {
		return strings.Contains(text, "free\tplan")
	})

	// Looked up from its row: the plan's limit has nothing left, and says
	// when it is full again.
	page.Click("#most-refused tbody button")
	limit := page.WaitText(`#lookup-limits tr[data-limit="plan"]`, "the refusing limit in the lookup", func(text string) bool {
		return strings.Contains(text, "NONE LEFT")
	})
	if !regexp.MustCompile(`in [0-9.]+ s, at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`).MatchString(limit) {
		t.Errorf("the refusing limit says no reset time: %q", limit)
	}
	if lookedUp := page.Text("#lookup-plan"); !strings.Contains(lookedUp, sub) || !strings.Contains(lookedUp, "plan free") {
		t.Errorf("lookup: %q", lookedUp)
	}
	if other := page.Text("#lookup-other"); !strings.Contains(other, "Idempotency keys stored\n1") {
		t.Errorf("lookup: %q, want the one Idempotency-Key the subject used", other)
	}

	// Asked, then cancelled: nothing is reset.
	page.Click("#reset-button")
	if q := page.Text("#reset-question"); !strings.Contains(q, sub) {
		t.Fatalf("the confirmation does not name the subject: %q", q)
	}
	page.Click("#reset-no")
	page.WaitText("#reset-status", "the cancelled reset", func(text string) bool { return text == "Not reset." })
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after a cancelled reset: %d, want 429", res.StatusCode)
	}
	if strings.Contains(s.log.String(), `"action":"reset-limits"`) {
		t.Fatal("a reset-limits action before it was confirmed")
	}

	// Confirmed: reset, audited under the operator's name.
	page.Click("#reset-button")
	page.Click("#reset-yes")
	page.WaitText("#reset-status", "the confirmed reset", func(text string) bool { return strings.HasPrefix(text, "Reset: plan") })
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Fatalf("after the confirmed reset: %d, want 200", res.StatusCode)
	}
	audit := auditLines(t, s.log.String(), "reset-limits")
	if len(audit) != 1 || audit[0]["subject"] != sub || audit[0]["who"] != "loopback" || audit[0]["status"] != 200.0 {
		t.Errorf("reset-limits audit lines: %v, want one of %s by loopback, 200", audit, sub)
	}
	if len(auditLines(t, s.log.String(), "dashboard")) != 1 {
		t.Errorf("opening the page is not audited once:\n%s", s.log.String())
	}

	// The second backend is killed: its connections are refused, its
	// health check fails, and the page says it is ejected, since when,
	// and what the last check said.
	s.second.Refuse()
	row := page.WaitText(`#backends tr[data-addr="`+s.second.Addr+`"]`, "the killed backend ejected", func(text string) bool {
		return strings.Contains(text, "EJECTED")
	})
	if !strings.Contains(row, "FAILED") || !regexp.MustCompile(`\d\d:\d\d:\d\d UTC`).MatchString(row) {
		t.Errorf("the ejected backend's row lacks its failed check or since when: %q", row)
	}
}

// auditLines are the log's audit lines of action.
func auditLines(t *testing.T, log, action string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["audit"] == "operator" && m["action"] == action && m["msg"] == "admin action" {
			out = append(out, m)
		}
	}
	return out
}

// Off loopback the page, its state and its actions need the operator
// token: without one the page is refused (and asks a browser for it as a
// password), with a token lacking the role too. With the token, the page
// works; a page of another origin in the same browser, whose requests
// carry the same token, reads nothing and resets nothing.
func TestOperatorPageIsRefusedToOtherOriginsAndOffLoopbackWithoutTheOperatorToken(t *testing.T) {
	t.Parallel()
	s := startDashboardStack(t, func(c *config.Config) { c.Admin.Addr = "0.0.0.0:0" })
	adminURL := strings.Replace(s.edge.AdminURL, "[::]", "127.0.0.1", 1)
	admin, viewer := s.token("svc-admin"), s.token("svc-viewer")

	get := func(path string, header http.Header) *http.Response {
		t.Helper()
		r, _ := http.NewRequest("GET", adminURL+path, nil)
		for k, v := range header {
			r.Header[k] = v
		}
		res, err := testkit.HTTP1Client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	basic, _ := http.NewRequest("GET", adminURL, nil)
	basic.SetBasicAuth("operator", admin)
	for _, tt := range []struct {
		name, path string
		header     http.Header
		want       int
	}{
		{"no token", "/dashboard/", nil, http.StatusUnauthorized},
		{"no token, state", "/dashboard/state", nil, http.StatusUnauthorized},
		{"no token, script", "/dashboard/dashboard.js", nil, http.StatusUnauthorized},
		{"a token without svc-admin", "/dashboard/", bearer(viewer), http.StatusForbidden},
		{"the operator token", "/dashboard/", bearer(admin), http.StatusOK},
		{"the operator token as a browser's password", "/dashboard/state", basic.Header, http.StatusOK},
		{"the operator token from another origin", "/dashboard/state",
			http.Header{"Authorization": {"Bearer " + admin}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"the operator token from another site", "/dashboard/state",
			http.Header{"Authorization": {"Bearer " + admin}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
	} {
		res := get(tt.path, tt.header)
		if res.StatusCode != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, res.StatusCode, tt.want)
		}
		if tt.want == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: WWW-Authenticate %q, want a Basic challenge", tt.name, res.Header.Get("WWW-Authenticate"))
		}
		if tt.want == http.StatusOK && (!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY") {
			t.Errorf("%s: the page may be framed by another site: %v", tt.name, res.Header)
		}
	}

	browser := testkit.StartChromium(t)
	refused := browser.NewPage(nil)
	// Headless, nobody answers the browser's question for a password.
	if failed := refused.TryNavigate(adminURL + "/dashboard/"); failed != "net::ERR_INVALID_AUTH_CREDENTIALS" {
		t.Errorf("the page without a token: %q, want the browser to ask for credentials", failed)
	}

	// The operator's browser sends the token with every request, to any
	// site: the page works...
	page := browser.NewPage(map[string]string{"Authorization": "Bearer " + admin})
	page.Navigate(adminURL + "/dashboard/")
	page.WaitText("#plans", "the plans", func(text string) bool { return strings.Contains(text, "silver") })

	// ...and a page of another site, in the same browser, gets nothing.
	tok := s.token("free-dashboard-cross")
	sub := subjectOf(t, tok)
	for range 2 {
		jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
	}
	evil := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		admin, _ := json.Marshal(adminURL)
		subject, _ := json.Marshal(sub)
		_, _ = w.Write([]byte(`<!doctype html><title>evil</title><script>
const admin = ` + string(admin) + `, sub = ` + string(subject) + `;
Promise.allSettled([
  fetch(admin + "/dashboard/state", {mode: "no-cors", credentials: "include"}),
  fetch(admin + "/admin/v1/subjects/" + encodeURIComponent(sub) + "/reset-limits", {method: "POST", mode: "no-cors", credentials: "include", body: "{}"}),
]).then(() => { document.title = "sent"; });
</script>`))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = evil.Serve(ln) }()
	t.Cleanup(func() { _ = evil.Close() })
	other := browser.NewPage(map[string]string{"Authorization": "Bearer " + admin})
	other.Navigate("http://" + ln.Addr().String() + "/")
	other.WaitText("title", "the other site's requests sent", func(text string) bool { return text == "sent" })
	testkit.WaitFor(t, "both requests refused and audited", func() bool {
		return strings.Count(s.log.String(), `"msg":"admin action refused","audit":"operator","action":"dashboard"`) >= 1 &&
			strings.Count(s.log.String(), `"msg":"admin action refused","audit":"operator","action":"reset-limits"`) >= 1
	})
	if len(auditLines(t, s.log.String(), "reset-limits")) != 0 {
		t.Fatal("another site reset a subject's limits")
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after the other site's attempt: %d, want 429", res.StatusCode)
	}
}

// dashboardState is the part of GET /dashboard/state this file reads.
type dashboardState struct {
	SpanSeconds float64 `json:"span_seconds"`
	Policy      struct {
		LoadedAt       time.Time  `json:"loaded_at"`
		ReloadFailedAt *time.Time `json:"reload_failed_at"`
		ReloadError    string     `json:"reload_error"`
		Plans          []struct {
			Name  string `json:"name"`
			Burst int    `json:"burst"`
		} `json:"plans"`
	} `json:"policy"`
	Backends []struct {
		Calls float64  `json:"calls"`
		P99ms *float64 `json:"p99_ms"`
		Share float64  `json:"share"`
	} `json:"backends"`
	Traffic struct {
		Calls    map[string]float64 `json:"calls"`
		Refusals []struct {
			Plan, Limit string
			Calls       float64
		} `json:"refusals"`
	} `json:"traffic"`
}

func readState(t *testing.T, adminURL string) dashboardState {
	t.Helper()
	code, body := adminCall(t, "GET", adminURL, "/dashboard/state", "")
	if code != http.StatusOK {
		t.Fatalf("state: %d %s", code, body)
	}
	var st dashboardState
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The page's numbers are the replica's: the calls it forwarded and refused
// since the page was opened, by outcome, plan and limit, and the backend's
// share and latency; and its policy says when it was loaded and why the
// last reload failed, until one succeeds.
func TestOperatorPageStateCountsCallsAndSaysWhyTheLastReloadFailed(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, tightFreePlan)
	start := readState(t, s.edge.AdminURL) // the first sample
	tok := s.token("free-dashboard-counted")
	for range 3 {
		jsonCall(t, s.edge.URL, tok, listOrgs, "{}") // burst 2: the third is refused
	}
	var st dashboardState
	testkit.WaitFor(t, "the calls counted since the page was opened", func() bool {
		st = readState(t, s.edge.AdminURL)
		return st.SpanSeconds > 0 && st.Traffic.Calls["forwarded"] == 2 && st.Traffic.Calls["refused"] == 1
	})
	if len(st.Traffic.Refusals) != 1 || st.Traffic.Refusals[0].Plan != "free" || st.Traffic.Refusals[0].Limit != "plan" || st.Traffic.Refusals[0].Calls != 1 {
		t.Errorf("refusals: %+v, want one by free's plan limit", st.Traffic.Refusals)
	}
	if len(st.Backends) != 1 || st.Backends[0].Calls != 2 || st.Backends[0].Share != 1 || st.Backends[0].P99ms == nil {
		t.Errorf("backends: %+v, want 2 calls, all of them, with a latency", st.Backends)
	}

	writeConfigText(t, s.path, "limits: [not, a, map]\n")
	if err := s.edge.App.Reload(ctxT(t), s.path); err == nil {
		t.Fatal("an invalid file reloaded")
	}
	st = readState(t, s.edge.AdminURL)
	if st.Policy.ReloadFailedAt == nil || !strings.Contains(st.Policy.ReloadError, "limits") || !st.Policy.LoadedAt.Equal(start.Policy.LoadedAt) {
		t.Errorf("after a failed reload: %+v, want the failure and the policy loaded at start", st.Policy)
	}
	next := *s.edge.Config
	next.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 7}, "pro": {RequestsPerMinute: 1, Burst: 50}}
	writeConfig(t, s.path, &next)
	if err := s.edge.App.Reload(ctxT(t), s.path); err != nil {
		t.Fatal(err)
	}
	st = readState(t, s.edge.AdminURL)
	if st.Policy.ReloadFailedAt != nil || !st.Policy.LoadedAt.After(start.Policy.LoadedAt) {
		t.Errorf("after a good reload: %+v, want no failure and a later load", st.Policy)
	}
	for _, p := range st.Policy.Plans {
		if p.Name == "free" && p.Burst != 7 {
			t.Errorf("free's burst after the reload: %d, want 7", p.Burst)
		}
	}
}

func writeConfigText(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
