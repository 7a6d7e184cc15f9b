package edge_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/reconcile"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
	"github.com/orgedge/edge/orgsvc/store"
)

// adoptStack is a backend on PostgreSQL and an edge that reconciles with
// it every limits.reconcile_interval (an hour unless the test changes it).
type adoptStack struct {
	iss        string
	backend    *testkit.Backend
	edge       *testkit.Edge
	reconciler *reconcile.Reconciler
}

func startAdoptStack(t *testing.T, svc orgsvc.Config, change func(*config.Config)) *adoptStack {
	t.Helper()
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.Postgres, iss.URL(), svc)
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Upstream.AdminURL = be.AdminURL
	cfg.Limits.ReconcileInterval = time.Hour
	if change != nil {
		change(cfg)
	}
	return newAdoptStack(t, iss.URL(), be, cfg)
}

func newAdoptStack(t *testing.T, iss string, be *testkit.Backend, cfg *config.Config) *adoptStack {
	t.Helper()
	e := testkit.StartEdge(t, cfg)
	s := &adoptStack{iss: iss, backend: be, edge: e}
	if cfg.Redis.Addr != "" {
		s.reconciler = reconciler(t, e)
	}
	return s
}

// pass runs a reconciliation pass now, as the edge's does every interval.
func (s *adoptStack) pass(t *testing.T) (adopted, released int) {
	t.Helper()
	res, err := s.reconciler.Pass(ctxT(t))
	if err != nil {
		t.Fatalf("reconciliation pass: %v", err)
	}
	return res.Adopted, res.Ended
}

// backendEnvironments is how many live environments the backend holds in
// project prj.
func (s *adoptStack) backendEnvironments(t *testing.T, prj string) int {
	t.Helper()
	list, _, err := s.backend.Store.ListEnvironments(ctxT(t), store.EnvironmentFilter{ProjectID: prj}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// A free subject (2 concurrent environments) whose environments the edge
// holds no record of, because they were created straight at the backend,
// around the edge: within a reconciliation interval the edge counts them,
// with their compute, and refuses the next CreateEnvironment with the
// quota error. The subject had no record at all in Redis: the edge's
// periodic pass finds it in the backend's listing.
func TestEnvironmentsCreatedAroundTheEdgeAreCountedByReconciliation(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		s := startAdoptStack(t, orgsvc.Config{}, func(cfg *config.Config) {
			useRedis(cfg)
			cfg.Limits.ReconcileInterval = time.Second
		})
		tok := testkit.Token(t, s.iss, testenv.Unique("free-around"))
		c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, tok)
		direct := testkit.NewClients(s.backend.URL, testkit.ConnectProto, tok)
		ctx := ctxT(t)
		_, prj := project(t, c, "around")
		for _, name := range []string{"a", "b"} {
			if _, err := createEnv(ctx, direct, prj, name); err != nil {
				t.Fatal(err)
			}
		}
		// Waiting on the metric, not on GetUsage: each GetUsage spends the
		// free plan's rate.
		metrics := s.edge.AdminURL + "/metrics"
		testkit.ScrapeUntil(t, metrics, "a pass adopting the 2 environments created around the edge", func(m testkit.Samples) bool {
			return m.Sum("edge_quota_adopted_environments_total") >= 2
		})
		u, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if r := u.Msg.ResourceUsage; r.Environments != 2 || !(r.VcpuHours > 0) || !(r.MemoryGbHours > 0) {
			t.Fatalf("after reconciliation GetUsage says %v, want 2 running environments accruing compute", r)
		}
		_, err = createEnv(ctx, c, prj, "c")
		wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
		if n := s.backendEnvironments(t, prj); n != 2 {
			t.Fatalf("the backend holds %d environments of a free subject, want 2", n)
		}
		// Later passes find nothing more to adopt: the count stays exact.
		passes := func(m testkit.Samples) float64 { return m.Sum("edge_quota_reconcile_passes_total", "outcome", "ok") }
		seen := passes(testkit.Scrape(t, metrics))
		m := testkit.ScrapeUntil(t, metrics, "two more reconciliation passes", func(m testkit.Samples) bool { return passes(m) >= seen+2 })
		if n := m.Sum("edge_quota_adopted_environments_total"); n != 2 {
			t.Fatalf("edge_quota_adopted_environments_total %v, want 2", n)
		}
		if n := running(t, c); n != 2 {
			t.Fatalf("after more passes the edge counts %d, want 2", n)
		}
	})
}

// A Redis restarted empty (no persistence) has lost every record of a free
// subject's two environments: while it was down the edge refused to create
// more (the quota could not be checked), and once it is back the first
// pass counts them again, so a third is refused.
func TestEnvironmentsRedisLostAreCountedAgainOnceItIsBack(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})
	s := startAdoptStack(t, orgsvc.Config{}, func(cfg *config.Config) { cfg.Redis.Addr = rs.Addr })
	tok := testkit.Token(t, s.iss, testenv.Unique("free-lost"))
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, tok)
	ctx := ctxT(t)
	_, prj := project(t, c, "lost")
	for _, name := range []string{"a", "b"} {
		if _, err := createEnv(ctx, c, prj, name); err != nil {
			t.Fatal(err)
		}
	}
	rs.Kill()
	_, err := createEnv(ctx, c, prj, "while-down")
	wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
	rs.Restart()
	// The edge reads Redis again (its pool reconnects).
	var running int64
	testkit.WaitFor(t, "the edge to read Redis again", func() bool {
		u, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
		if err != nil {
			return false
		}
		running = int64(u.Msg.ResourceUsage.Environments)
		return true
	})
	if running != 0 {
		t.Fatalf("a Redis restarted empty counts %d running environments", running)
	}
	if adopted, _ := s.pass(t); adopted != 2 {
		t.Fatalf("the pass adopted %d environments, want 2", adopted)
	}
	_, err = createEnv(ctx, c, prj, "c")
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
	if n := s.backendEnvironments(t, prj); n != 2 {
		t.Fatalf("the backend holds %d environments of a free subject, want 2", n)
	}
}

// holdingStore holds the answer to the creation of an environment named
// "held" after the backend stored it, until the test lets it go: the
// edge's reservation is then in flight for an environment that exists.
type holdingStore struct {
	store.Store
	created chan string
	release chan struct{}
}

func (s *holdingStore) CreateEnvironment(ctx context.Context, e store.Environment) (store.Environment, error) {
	e, err := s.Store.CreateEnvironment(ctx, e)
	if err == nil && e.Name == "held" {
		s.created <- e.ID
		select {
		case <-s.release:
		case <-ctx.Done():
			return e, ctx.Err()
		}
	}
	return e, err
}

// A pass that runs while a CreateEnvironment is being confirmed (the
// backend created it, the edge has not read the answer yet) counts that
// environment once: it adopts an environment created around the edge
// minutes earlier, leaves the one in flight to its reservation, and a
// create meanwhile still has the slot that is left. The subject may run 4.
func TestAPassWhileACreateIsConfirmedCountsItOnce(t *testing.T) {
	t.Parallel()
	iss := testkit.StartIssuer(t)
	tok := testkit.Token(t, iss.URL(), testenv.Unique("free-inflight"))
	hold := &holdingStore{Store: testkit.OpenStore(t, testkit.Postgres), created: make(chan string, 1), release: make(chan struct{})}
	var backInTime atomic.Int64 // how far the backend's clock lags
	be := testkit.StartBackend(t, testkit.Postgres, iss.URL(), orgsvc.Config{
		Store: hold,
		Now:   func() time.Time { return time.Now().Add(-time.Duration(backInTime.Load())) },
	})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Upstream.AdminURL = be.AdminURL
	cfg.Limits.ReconcileInterval = time.Hour
	q := cfg.Limits.Plans["free"].Quotas
	q.ConcurrentEnvironments = 4
	cfg.Limits.SubjectQuotas = map[string]config.Quotas{testkit.Subject(t, tok): q}
	s := newAdoptStack(t, iss.URL(), be, cfg)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, tok)
	ctx := ctxT(t)
	_, prj := project(t, c, "inflight")
	if _, err := createEnv(ctx, c, prj, "e1"); err != nil {
		t.Fatal(err)
	}
	// Around the edge, five minutes ago.
	backInTime.Store(int64(5 * time.Minute))
	if _, err := createEnv(ctx, testkit.NewClients(be.URL, testkit.ConnectProto, tok), prj, "around"); err != nil {
		t.Fatal(err)
	}
	backInTime.Store(0)

	held := make(chan error, 1)
	go func() {
		_, err := createEnv(ctx, c, prj, "held")
		held <- err
	}()
	select {
	case <-hold.created:
	case err := <-held:
		t.Fatalf("the held create ended early: %v", err)
	}
	// Counted now: e1 (running), "held" (its reservation); "around" is not.
	if adopted, _ := s.pass(t); adopted != 1 {
		close(hold.release)
		t.Fatalf("the pass adopted %d environments, want 1 (the one created around the edge, not the one in flight)", adopted)
	}
	// e1, "around", and "held"'s reservation: one slot left.
	_, err := createEnv(ctx, c, prj, "e3")
	close(hold.release)
	if err != nil {
		t.Fatalf("a create while another is confirmed, one slot left: %v", err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held create: %v", err)
	}
	if n := running(t, c); n != 4 {
		t.Fatalf("the edge counts %d running environments, the backend holds 4", n)
	}
	if adopted, released := s.pass(t); adopted != 0 || released != 0 {
		t.Fatalf("a pass after the confirmation adopted %d and released %d, want nothing", adopted, released)
	}
	_, err = createEnv(ctx, c, prj, "e4")
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
	if n := s.backendEnvironments(t, prj); n != 4 {
		t.Fatalf("the backend holds %d environments, want 4", n)
	}
	if n := running(t, c); n != 4 {
		t.Fatalf("the edge counts %d running environments, want 4", n)
	}
}
