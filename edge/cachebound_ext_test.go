package edge_test

import (
	"fmt"
	"testing"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestTokenCacheBoundIsSeenInMetrics: three subjects call through an edge
// whose token cache holds two; /metrics shows two entries, the bound and
// one eviction, and every other cache with its bound.
func TestTokenCacheBoundIsSeenInMetrics(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.OIDC.TokenCacheSize = 2 })
	for i := range 3 {
		c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token(fmt.Sprint("pro-cache-", i)))
		if _, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatal(err)
		}
	}
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	for _, c := range []struct {
		metric string
		want   float64
	}{{"edge_cache_entries", 2}, {"edge_cache_max_entries", 2}, {"edge_cache_evictions_total", 1}} {
		if got := m.Sum(c.metric, "cache", "token"); got != c.want {
			t.Errorf("%s{cache=token} = %v, want %v", c.metric, got, c.want)
		}
	}
	for _, name := range []string{"refused_token", "failing_address", "refusal", "local_rate", "local_day", "shadow_log", "late_confirm"} {
		if m.Sum("edge_cache_max_entries", "cache", name) <= 0 {
			t.Errorf("no bound exposed for cache %s", name)
		}
	}
}
