package edge_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// policyStack is an edge started from a configuration file, as the edge
// command starts it, with its log kept.
type policyStack struct {
	edge  *testkit.Edge
	path  string
	log   *logBuffer
	token func(string) string
}

func startFromFile(t *testing.T, change func(*config.Config)) *policyStack {
	t.Helper()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	if change != nil {
		change(cfg)
	}
	path := filepath.Join(t.TempDir(), "edge.yaml")
	writeConfig(t, path, cfg)
	loaded, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuffer{}
	e := testkit.StartEdgeWith(t, loaded, testkit.EdgeOptions{Logger: testkit.Logger(log, "json", slog.LevelInfo)})
	return &policyStack{edge: e, path: path, log: log, token: func(who string) string { return testkit.Token(t, iss.URL(), who) }}
}

func writeConfig(t *testing.T, path string, cfg *config.Config) {
	t.Helper()
	// Write then rename, as editors and Kubernetes do, so that the
	// watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// countingClient is an HTTP/1.1 client that counts the connections it dials.
func countingClient(dials *atomic.Int32) *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}}
}

func tightFreePlan(c *config.Config) {
	c.Limits.Plans = map[string]config.Plan{
		"free": {RequestsPerMinute: 1, Burst: 2},
		"pro":  {RequestsPerMinute: 1, Burst: 50},
	}
}

func TestSighupReloadAppliesANewPlanOnTheSameConnectionAndKeepsItWhenTheFileIsInvalid(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, tightFreePlan)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.edge.App.WatchConfig(ctx, s.path, 0, hup) // signals only

	var dials atomic.Int32
	c := countingClient(&dials)
	tok := s.token("free-reload-alice")
	for i := range 2 {
		if res, _ := jsonCallWith(t, c, nil, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("call %d: status %d, want 200 (burst 2)", i+1, res.StatusCode)
		}
	}
	if res, _ := jsonCallWith(t, c, nil, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third call: status %d, want 429 (burst 2, 1/min)", res.StatusCode)
	}

	// The operator raises the free plan's burst and sends SIGHUP.
	next := *s.edge.Config
	next.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 20}, "pro": {RequestsPerMinute: 1, Burst: 50}}
	writeConfig(t, s.path, &next)
	hup <- os.Interrupt
	testkit.WaitFor(t, "a call admitted under the reloaded plan", func() bool {
		res, _ := jsonCallWith(t, c, nil, s.edge.URL, tok, listOrgs, "{}")
		code := res.StatusCode
		return code == http.StatusOK
	})
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	if got := m.Sum("edge_config_reloads_total", "result", "success"); got != 1 {
		t.Errorf("edge_config_reloads_total{result=success} = %v, want 1", got)
	}
	if got := m.Sum("edge_config_last_reload_successful"); got != 1 {
		t.Errorf("edge_config_last_reload_successful = %v, want 1", got)
	}

	// A bad edit: the edge keeps the running policy, says why, and counts it.
	bad := next
	bad.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 0}}
	writeConfig(t, s.path, &bad)
	hup <- os.Interrupt
	testkit.WaitFor(t, "the failed reload counted", func() bool {
		return testkit.Scrape(t, s.edge.AdminURL+"/metrics").Sum("edge_config_reloads_total", "result", "failure") == 1
	})
	if got := testkit.Scrape(t, s.edge.AdminURL+"/metrics").Sum("edge_config_last_reload_successful"); got != 0 {
		t.Errorf("edge_config_last_reload_successful = %v after a bad file, want 0", got)
	}
	if !strings.Contains(s.log.String(), "config reload failed: keeping the running policy") || !strings.Contains(s.log.String(), "limits.plans.free.burst") {
		t.Errorf("the log does not say the reload failed and why:\n%s", s.log.String())
	}
	if res, _ := jsonCallWith(t, c, nil, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Errorf("after a bad reload: status %d, want 200 under the running plan (burst 20)", res.StatusCode)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialed %d connections, want 1: a reload must not close connections", n)
	}
}

func TestChangedFileMovesASubjectToAnotherPlanAndWarnsAboutSettingsThatNeedARestart(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		tightFreePlan(c)
		// The plan claim comes before subject_plans: read one tokens lack.
		c.OIDC.PlanClaim = "contract_plan"
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.edge.App.WatchConfig(ctx, s.path, 20*time.Millisecond, nil)

	tok := s.token("free-reload-bob")
	for range 2 {
		jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429 on the free plan", res.StatusCode)
	}
	// The subject gets a contract: subject_plans moves it to pro. The
	// same edit also changes the Redis timeout, which needs a restart.
	sub := subjectOf(t, tok)
	next := *s.edge.Config
	next.Limits.SubjectPlans = map[string]string{sub: "pro"}
	next.Redis.Timeout = 3 * time.Second
	writeConfig(t, s.path, &next)
	testkit.WaitFor(t, "the subject admitted on pro", func() bool {
		res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
		code := res.StatusCode
		return code == http.StatusOK
	})
	logged := s.log.String()
	if !strings.Contains(logged, "apply only after a restart") || !strings.Contains(logged, `"redis"`) {
		t.Errorf("no warning naming redis as needing a restart:\n%s", logged)
	}
}
