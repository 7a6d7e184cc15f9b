package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// adminCall calls the operator API as curl would, with token unless empty
// (and Content-Type: application/json on a POST, as docs/operations.md says).
func adminCall(t *testing.T, method, base, path, token string) (int, []byte) {
	t.Helper()
	r, _ := http.NewRequest(method, base+path, nil)
	if method == "POST" {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestSupportEngineerInspectsAndUnblocksOneCustomerWithAnAuditTrail(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.Admin.Addr = "0.0.0.0:0" // not loopback: tokens required
		c.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 2, RequestsPerDay: 100}}
	})
	adminURL := strings.Replace(s.edge.AdminURL, "[::]", "127.0.0.1", 1)
	tok := s.token("free-op-erin")
	sub := subjectOf(t, tok)
	path := "/admin/v1/subjects/" + url.PathEscape(sub)

	for range 2 {
		jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429 before the support engineer steps in", res.StatusCode)
	}
	// A crashed edge left a stream lease behind.
	streams := quota.NewStreams(testenv.Redis(t), quota.Options{KeyPrefix: s.edge.Config.Redis.KeyPrefix})
	lease, err := streams.Acquire(context.Background(), sub, 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lease.Release)

	if code, body := adminCall(t, "GET", adminURL, path, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s, want 401", code, body)
	}
	if code, body := adminCall(t, "GET", adminURL, path, s.token("svc-viewer")); code != http.StatusForbidden {
		t.Fatalf("svc-viewer: %d %s, want 403", code, body)
	}
	adminTok := s.token("svc-admin")
	code, body := adminCall(t, "GET", adminURL, path, adminTok)
	if code != http.StatusOK {
		t.Fatalf("inspect: %d %s", code, body)
	}
	var st admin.SubjectState
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Plan != "free" || len(st.Limits) == 0 || st.Limits[0].Name != "plan" || st.Limits[0].Remaining != 0 || st.Limits[0].ResetAfterSeconds <= 60 {
		t.Errorf("plan limit %+v on %q, want free with 0 remaining and more than a minute to full:\n%s", st.Limits, st.Plan, body)
	}
	if st.Daily == nil || st.Daily.Used != 2 || st.Daily.Remaining != 98 || st.RequestsThisMonth != 2 {
		t.Errorf("daily %+v, month %d; want 2 used of 100, 2 this month:\n%s", st.Daily, st.RequestsThisMonth, body)
	}
	var watch *admin.StreamUse
	for i := range st.Streams {
		if strings.HasSuffix(st.Streams[i].Procedure, "/WatchEnvironment") {
			watch = &st.Streams[i]
		}
	}
	if watch == nil || watch.Open != 1 || watch.Limit != 20 {
		t.Errorf("streams %+v, want WatchEnvironment 1 open of 20", st.Streams)
	}
	if st.Environments.Quotas != (admin.Quotas{}) || st.Environments.Running != 0 {
		t.Errorf("environments %+v", st.Environments)
	}

	if code, body := adminCall(t, "POST", adminURL, path+"/reset-limits", adminTok); code != http.StatusOK {
		t.Fatalf("reset-limits: %d %s", code, body)
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Errorf("after reset-limits: status %d, want 200", res.StatusCode)
	}
	code, body = adminCall(t, "POST", adminURL, path+"/release-streams", adminTok)
	if code != http.StatusOK || !strings.Contains(string(body), `"released": 1`) {
		t.Errorf("release-streams: %d %s, want 1 released", code, body)
	}
	if n, err := streams.Open(context.Background(), sub); err != nil || n != 0 {
		t.Errorf("open leases after release-streams: %d (%v), want 0", n, err)
	}
	if code, body := adminCall(t, "POST", adminURL, path+"/settle-quota", adminTok); code != http.StatusNotImplemented {
		t.Errorf("settle-quota without a settler: %d %s, want 501", code, body)
	}

	// The audit trail: who did what to whom.
	var actions []string
	for line := range strings.Lines(s.log.String()) {
		var l struct {
			Msg, Audit, Action, Who, Subject string
			Status                           int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Audit == "operator" {
			if l.Subject != "" && l.Subject != sub {
				t.Errorf("audit line names subject %q, want %q", l.Subject, sub)
			}
			actions = append(actions, l.Action+" by "+l.Who)
		}
	}
	want := "inspect by unauthenticated|inspect by service-account-svc-viewer|inspect by service-account-svc-admin|reset-limits by service-account-svc-admin|release-streams by service-account-svc-admin|settle-quota by service-account-svc-admin"
	if got := strings.Join(actions, "|"); got != want {
		t.Errorf("audit lines:\n%s\nwant\n%s", got, want)
	}
}

func TestOperatorAPIOnLoopbackNeedsNoToken(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, nil)
	code, body := adminCall(t, "GET", s.edge.AdminURL, "/admin/v1/subjects/someone", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"plan": "free"`) {
		t.Fatalf("%d %s", code, body)
	}
	if !strings.Contains(s.log.String(), `"who":"loopback"`) {
		t.Errorf("no audit line by loopback:\n%s", s.log.String())
	}
}

// Support looks up a customer whose plan comes from its token: the edge
// cannot see the token, so it shows the plan the customer's calls were last
// charged under (kept with its day's count), with that plan's limits.
func TestInspectShowsThePlanTheSubjectsTokenWasChargedUnder(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, nil) // default plan free; admin on loopback
	tok := s.token("pro-support-dana")
	sub := subjectOf(t, tok)
	path := "/admin/v1/subjects/" + url.PathEscape(sub)

	inspect := func() admin.SubjectState {
		t.Helper()
		code, body := adminCall(t, "GET", s.edge.AdminURL, path, "")
		var st admin.SubjectState
		if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
			t.Fatalf("inspect: %d %s (%v)", code, body, err)
		}
		return st
	}
	// Before any call there is nothing to go by but the configuration.
	if st := inspect(); st.Plan != "free" || st.PlanSource != "default_plan" || st.LastChargedPlan != "" {
		t.Fatalf("before any call: plan %q from %q, last charged %q; want free from default_plan", st.Plan, st.PlanSource, st.LastChargedPlan)
	}
	for range 3 {
		if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	pro := s.edge.Config.Limits.Plans["pro"]
	st := inspect()
	if st.Plan != "pro" || st.PlanSource != "last_charged" || st.LastChargedPlan != "pro" {
		t.Fatalf("plan %q from %q, last charged %q; want pro, from the token's charges", st.Plan, st.PlanSource, st.LastChargedPlan)
	}
	if l := st.Limits[0]; l.Name != "plan" || l.RequestsPerMinute != pro.RequestsPerMinute || l.Burst != pro.Burst || l.Remaining < pro.Burst-3 || l.Remaining > pro.Burst {
		t.Errorf("plan limit %+v, want pro's %d/min, burst %d, 3 spent", l, pro.RequestsPerMinute, pro.Burst)
	}
	if st.Daily == nil || st.Daily.Limit != int(pro.RequestsPerDay) || st.Daily.Used != 3 {
		t.Errorf("daily %+v, want 3 used of pro's %d", st.Daily, pro.RequestsPerDay)
	}
	// ?plan= still shows another plan's limits, and says what was charged.
	code, body := adminCall(t, "GET", s.edge.AdminURL, path+"?plan=free", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"plan": "free"`) || !strings.Contains(string(body), `"last_charged_plan": "pro"`) {
		t.Errorf("?plan=free: %d %s", code, body)
	}
}

func TestFailedAdminLoginsLeaveAnAuditLineWithoutTheToken(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) { c.Admin.Addr = "0.0.0.0:0" })
	adminURL := strings.Replace(s.edge.AdminURL, "[::]", "127.0.0.1", 1)
	real := s.token("svc-admin")
	// A forged token: a real one's claims with another signature.
	forged := real[:strings.LastIndexByte(real, '.')+1] + "Zm9yZ2VkLXNpZ25hdHVyZQ"
	for _, tok := range []string{"", forged} {
		if code, body := adminCall(t, "POST", adminURL, "/admin/v1/subjects/victim/reset-limits", tok); code != http.StatusUnauthorized {
			t.Fatalf("token %q: %d %s, want 401", tok, code, body)
		}
	}
	var refused []string
	for line := range strings.Lines(s.log.String()) {
		var l struct {
			Msg, Audit, Action, Who, Subject, Remote, Err string
			Status                                        int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Audit == "operator" {
			if l.Msg != "admin action refused" || l.Remote == "" || l.Err == "" {
				t.Errorf("audit line %s", line)
			}
			refused = append(refused, fmt.Sprintf("%s %s on %s: %d", l.Action, l.Who, l.Subject, l.Status))
		}
	}
	want := "reset-limits unauthenticated on victim: 401|reset-limits unauthenticated on victim: 401"
	if got := strings.Join(refused, "|"); got != want {
		t.Errorf("audit lines %q, want %q:\n%s", got, want, s.log.String())
	}
	if logged := s.log.String(); strings.Contains(logged, "Zm9yZ2VkLXNpZ25hdHVyZQ") || strings.Contains(logged, real[:strings.IndexByte(real, '.')]) {
		t.Errorf("the log holds the token:\n%s", logged)
	}
}
