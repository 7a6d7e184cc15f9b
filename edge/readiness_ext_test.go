package edge_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// getReadyz returns /readyz's status and body.
func getReadyz(t *testing.T, adminURL string) (int, string) {
	t.Helper()
	res, err := testkit.HTTP1Client.Get(adminURL + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// callLoad sends ListOrganizations through the edge from a few clients until
// stop is closed, and counts the answers by status (0: no answer).
type callLoad struct {
	mu     sync.Mutex
	status map[int]int
	total  atomic.Int64
}

func startCallLoad(t *testing.T, url, token string, clients int) (l *callLoad, stop func()) {
	t.Helper()
	l = &callLoad{status: map[int]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				code := 0
				req, _ := http.NewRequestWithContext(ctx, "POST", url+listOrgs, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				if res, err := testkit.HTTP1Client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					code = res.StatusCode
				} else if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.status[code]++
				l.mu.Unlock()
				l.total.Add(1)
			}
		}()
	}
	return l, func() { cancel(); wg.Wait() }
}

func (l *callLoad) counts() map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]int, len(l.status))
	for k, v := range l.status {
		out[k] = v
	}
	return out
}

func TestReadinessDoesNotFollowRedisUnderFailOpen(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Redis.Addr = rs.Addr
		c.Limits.OnRedisFailure = config.FailOpen
		// Generous enough that the local share admits every call of the test.
		c.Limits.Plans = map[string]config.Plan{"big": {RequestsPerMinute: 1_000_000, Burst: 1_000_000}}
		c.Limits.DefaultPlan = "big"
	})
	if code, body := getReadyz(t, s.edge.AdminURL); code != http.StatusOK {
		t.Fatalf("before the outage: /readyz %d %s", code, body)
	}
	l, stop := startCallLoad(t, s.edge.URL, token("free-readiness-open"), 4)
	defer stop()
	testkit.WaitFor(t, "calls before the outage", func() bool { return l.counts()[http.StatusOK] >= 20 })

	rs.Stop()
	stopped := l.total.Load()
	// Probe readiness while calls keep coming, until well after the breaker
	// opened: every probe must say ready.
	probes := 0
	for l.total.Load() < stopped+200 || probes < 20 {
		if code, body := getReadyz(t, s.edge.AdminURL); code != http.StatusOK {
			t.Fatalf("/readyz %d %q with Redis down under fail_open (probe %d, %d calls since the kill)", code, body, probes, l.total.Load()-stopped)
		}
		probes++
	}
	stop()
	c := l.counts()
	if c[http.StatusOK] != int(l.total.Load()) {
		t.Fatalf("answers by status %v: every call should have been admitted on the local share", c)
	}
	m := scrapeAdmin(t, s.edge.AdminURL)
	if !strings.Contains(m, "edge_fail_open_active 1") {
		t.Fatalf("the outage is not visible in the metrics:\n%s", grepLines(m, "edge_fail_open_active", "edge_redis_breaker"))
	}
}

func TestReadinessFollowsRedisUnderFailClosed(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	s, _ := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Redis.Addr = rs.Addr
		c.Limits.OnRedisFailure = config.FailClosed
	})
	if code, body := getReadyz(t, s.edge.AdminURL); code != http.StatusOK {
		t.Fatalf("before the outage: /readyz %d %s", code, body)
	}
	rs.Stop()
	if code, body := getReadyz(t, s.edge.AdminURL); code != http.StatusServiceUnavailable || !strings.Contains(body, "redis:") {
		t.Fatalf("Redis down under fail_closed: /readyz %d %q, want 503 naming redis", code, body)
	}
	rs.Start()
	testkit.WaitFor(t, "readiness after Redis came back", func() bool { code, _ := getReadyz(t, s.edge.AdminURL); return code == http.StatusOK })
}

func scrapeAdmin(t *testing.T, adminURL string) string {
	t.Helper()
	res, err := testkit.HTTP1Client.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
