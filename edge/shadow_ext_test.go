package edge_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
)

func TestShadowPlanAdmitsWhatItWouldRefuseWithTheHeadersMetricsAndLogOfARefusal(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 2, Shadow: true}}
	})
	tok := s.token("free-shadow-carol")
	for i := range 5 {
		res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
		code, h := res.StatusCode, res.Header
		if code != http.StatusOK {
			t.Fatalf("call %d: status %d, want 200: a shadow plan refuses no one", i+1, code)
		}
		if i >= 2 && h.Get("X-RateLimit-Remaining") != "0" {
			t.Errorf("call %d: X-RateLimit-Remaining %q, want 0 as if the plan were enforced", i+1, h.Get("X-RateLimit-Remaining"))
		}
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every call recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") == 5
	})
	if got := m.Sum("edge_limit_decisions_total", "plan", "free", "limit", "plan", "outcome", "shadow_refused"); got != 3 {
		t.Errorf("shadow_refused by the plan rate = %v, want 3 (calls 3 to 5)", got)
	}
	if got := m.Sum("edge_limit_decisions_total", "outcome", "refused"); got != 0 {
		t.Errorf("refused = %v, want 0", got)
	}
	// Whom it would refuse: one line per subject and limit per minute.
	if n := strings.Count(s.log.String(), "shadow limit would refuse"); n != 1 {
		t.Errorf("%d log lines about the shadow refusals, want 1:\n%s", n, s.log.String())
	}
	if !strings.Contains(s.log.String(), `"client_id":"cli"`) {
		t.Errorf("the shadow log line does not name the client:\n%s", s.log.String())
	}
}

func TestShadowOperationLimitStillLetsTheEnforcedPlanCountEveryCall(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 3}}
		for i := range c.Operations {
			if c.Operations[i].Procedure == listOrgs {
				c.Operations[i].RatePerMinute, c.Operations[i].Shadow = 1, true
			}
		}
	})
	tok := s.token("free-shadow-dave")
	// Call 1 passes both limits; calls 2 and 3 are over the operation's
	// shadow limit but within the plan's burst of 3, which counts them.
	for i := range 3 {
		if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("call %d: status %d, want 200", i+1, res.StatusCode)
		}
	}
	res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
	code, h := res.StatusCode, res.Header
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("call 4: status %d (Retry-After %q), want 429 from the enforced plan", code, h.Get("Retry-After"))
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every call recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") == 4
	})
	if got := m.Sum("edge_limit_decisions_total", "limit", "op:ListOrganizations", "outcome", "shadow_refused"); got != 2 {
		t.Errorf("shadow_refused by op:ListOrganizations = %v, want 2", got)
	}
	if got := m.Sum("edge_limit_decisions_total", "limit", "plan", "outcome", "refused"); got != 1 {
		t.Errorf("refused by the plan = %v, want 1", got)
	}
}
