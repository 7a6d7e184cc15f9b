package edge_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/reconcile"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/backendapi"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// quotaClients are one caller's clients in protocol p; with gzip, every
// request is gzip-compressed, which makes a gRPC backend compress its
// answers too.
func quotaClients(base string, p testkit.Protocol, token string, gzip bool) testkit.Clients {
	if p == testkit.HTTPJSON || !gzip {
		return testkit.NewClients(base, p, token)
	}
	hc := testkit.HTTP1Client
	if p == testkit.GRPC {
		hc = testkit.H2CClient
	}
	return testkit.NewClientsWith(hc, base, p, token, connect.WithSendGzip())
}

// project creates an organization and a project for c's caller.
func project(t *testing.T, c testkit.Clients, name string) (orgID, projectID string) {
	t.Helper()
	ctx := ctxT(t)
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	return org.Msg.Id, prj.Msg.Id
}

func createEnv(ctx context.Context, c testkit.Clients, projectID, name string) (string, error) {
	res, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: name, BlueprintId: "redis-7", ProjectId: projectID}))
	if err != nil {
		return "", err
	}
	return res.Msg.Environment.Id, nil
}

// running is the number of running environments the edge counts for c's
// caller (GetUsage).
func running(t *testing.T, c testkit.Clients) int {
	t.Helper()
	u, err := c.Usage.GetUsage(ctxT(t), req(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return int(u.Msg.ResourceUsage.Environments)
}

func TestGzipCompressedCreatesAndDeletesKeepTheEnvironmentQuota(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	for _, p := range []testkit.Protocol{testkit.GRPC, testkit.GRPCWeb, testkit.ConnectProto, testkit.ConnectJSON} {
		t.Run(string(p), func(t *testing.T) {
			c := quotaClients(s.edge.URL, p, token("free-gzip-"+string(p)), true)
			_, prj := project(t, c, "gzip-"+string(p))
			ctx := ctxT(t)
			first, err := createEnv(ctx, c, prj, "one")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := createEnv(ctx, c, prj, "two"); err != nil {
				t.Fatal(err)
			}
			_, err = createEnv(ctx, c, prj, "three")
			wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
			if n := running(t, c); n != 2 {
				t.Fatalf("the edge counts %d running environments, want 2", n)
			}
			if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: first})); err != nil {
				t.Fatal(err)
			}
			if n := running(t, c); n != 1 {
				t.Fatalf("after a compressed delete the edge counts %d running environments, want 1", n)
			}
			if _, err := createEnv(ctx, c, prj, "three"); err != nil {
				t.Fatalf("after deleting one: %v", err)
			}
		})
	}
	if n := testkit.Scrape(t, s.edge.AdminURL+"/metrics").Sum("edge_quota_unreadable_answers_total"); n != 0 {
		t.Fatalf("%v answers counted unreadable, want 0: the edge reads gzip", n)
	}
}

// startOddUpstream is a backend that answers CreateEnvironment with success
// in a compression the edge does not know (Connect proto, Content-Encoding
// br, bytes that are no brotli) and every other call with an empty message.
func startOddUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		if strings.HasSuffix(r.URL.Path, "/CreateEnvironment") {
			w.Header().Set("Content-Encoding", "br")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("\x0b\x02\x80not really brotli"))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestASuccessfulAnswerTheEdgeCannotReadKeepsItsReservationAndIsCounted(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	cfg := testkit.EdgeConfig(t, startOddUpstream(t), iss.URL())
	e := testkit.StartEdge(t, cfg)
	c := testkit.NewClients(e.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "free-odd"))
	ctx := ctxT(t)
	for i := range 2 {
		// The client cannot read it either: what matters is what the edge kept.
		if _, err := createEnv(ctx, c, "prj_x", fmt.Sprintf("e%d", i)); err == nil {
			t.Fatal("the client read a brotli answer")
		}
	}
	_, err := createEnv(ctx, c, "prj_x", "e3")
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if n := m.Sum("edge_quota_unreadable_answers_total", "method", "CreateEnvironment"); n != 2 {
		t.Fatalf("edge_quota_unreadable_answers_total %v, want 2", n)
	}
	if n := m.Sum("edge_quota_reservations_total", "outcome", "rolled_back"); n != 0 {
		t.Fatalf("%v reservations rolled back, want none: the environments may exist", n)
	}
}

func TestForcedDeletesGiveTheirEnvironmentsSlotsBackAtOnce(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(s.edge.URL, p, token("free-forced-"+string(p)))
			ctx := ctxT(t)
			org, prj := project(t, c, "forced-"+string(p))
			for _, name := range []string{"a", "b"} {
				if _, err := createEnv(ctx, c, prj, name); err != nil {
					t.Fatal(err)
				}
			}
			res, err := c.Org.DeleteProject(ctx, req(&svcv1.DeleteProjectRequest{ProjectId: prj, Force: true}))
			if err != nil {
				t.Fatal(err)
			}
			if h := res.Header().Get(backendapi.EndedHeader); h != "" {
				t.Fatalf("the client sees the backend's internal header: %q", h)
			}
			if n := running(t, c); n != 0 {
				t.Fatalf("after a forced DeleteProject the edge counts %d running environments, want 0", n)
			}
			prj2, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org, Name: "q"}))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"c", "d"} {
				if _, err := createEnv(ctx, c, prj2.Msg.Id, name); err != nil {
					t.Fatalf("creating %s after the forced delete: %v", name, err)
				}
			}
			if _, err := c.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: org, Force: true})); err != nil {
				t.Fatal(err)
			}
			if n := running(t, c); n != 0 {
				t.Fatalf("after a forced DeleteOrganization the edge counts %d running environments, want 0", n)
			}
			_, prj3 := project(t, c, "forced2-"+string(p))
			if _, err := createEnv(ctx, c, prj3, "e"); err != nil {
				t.Fatalf("creating after the forced organization delete: %v", err)
			}
		})
	}
}

func TestAnEnvironmentDeletedAroundTheEdgeGivesItsSlotBackWithinTheReconcileInterval(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		iss := testkit.SharedIssuer(t)
		be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		useRedis(cfg)
		cfg.Upstream.AdminURL = be.AdminURL
		cfg.Limits.ReconcileInterval = time.Second
		e := testkit.StartEdge(t, cfg)
		tok := testkit.Token(t, iss.URL(), "free-drift")
		c := testkit.NewClients(e.URL, testkit.HTTPJSON, tok)
		direct := testkit.NewClients(be.URL, testkit.ConnectProto, tok) // around the edge
		ctx := ctxT(t)
		_, prj := project(t, c, "drift")
		a, err := createEnv(ctx, c, prj, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := createEnv(ctx, c, prj, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: a})); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		for running(t, c) != 1 {
			if time.Since(deleted) > 5*cfg.Limits.ReconcileInterval {
				t.Fatalf("the edge still counts the environment deleted at the backend after %v", time.Since(deleted))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := createEnv(ctx, c, prj, "c"); err != nil {
			t.Fatalf("after reconciliation: %v", err)
		}
		// Compute stopped: two running environments, the usage grows by
		// their time alone.
		m := testkit.Scrape(t, e.AdminURL+"/metrics")
		if n := m.Sum("edge_quota_reconciled_environments_total"); n != 1 {
			t.Fatalf("edge_quota_reconciled_environments_total %v, want 1", n)
		}
	})
}

func TestRefusedCallsConsumeNoRateAndNoDailyCount(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("free-refused"))
	ctx := ctxT(t)
	_, prj := project(t, c, "refused")
	first, err := createEnv(ctx, c, prj, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "b"); err != nil {
		t.Fatal(err)
	}
	// Twelve quota refusals: on top of the two creates they would pass
	// CreateEnvironment's 10 a minute if they consumed its rate.
	for i := range 12 {
		_, err := createEnv(ctx, c, prj, fmt.Sprintf("x%d", i))
		wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
	}
	if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: first})); err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "c"); err != nil {
		t.Fatalf("after twelve quota refusals: %v, want the create admitted", err)
	}
	u, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	// CreateOrganization, CreateProject, 3 creates, 1 delete, GetUsage.
	if got := u.Msg.ApiUsage.RequestsToday; got != 7 {
		t.Fatalf("%d requests counted today, want 7: refused calls count for nothing", got)
	}
}

func TestARateRefusalGivesTheReservationBack(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		for i, op := range c.Operations {
			if strings.HasSuffix(op.Procedure, "/CreateEnvironment") {
				c.Operations[i].RatePerMinute = 1
			}
		}
	})
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("free-rate-refused"))
	ctx := ctxT(t)
	_, prj := project(t, c, "rate-refused")
	if _, err := createEnv(ctx, c, prj, "a"); err != nil {
		t.Fatal(err)
	}
	_, err := createEnv(ctx, c, prj, "b")
	wantError(t, err, connect.CodeResourceExhausted, "OPERATION_RATE_EXCEEDED", "edge")
	// Whatever the order in which the limits were asked, nothing is held
	// for the refused call: every reservation was confirmed or given back.
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	outcome := func(o string) float64 { return m.Sum("edge_quota_reservations_total", "outcome", o) }
	if held := outcome("reserved") - outcome("rolled_back") - outcome("confirmed"); held != 0 || outcome("confirmed") != 1 {
		t.Fatalf("reservations: %v held, %v confirmed; want 0 and 1", held, outcome("confirmed"))
	}
	if n := running(t, c); n != 1 {
		t.Fatalf("the edge counts %d running environments, want 1", n)
	}
}

func TestARetriedCreateGetsItsReplayNotAQuotaOrRateRefusal(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		for i, op := range c.Operations {
			if strings.HasSuffix(op.Procedure, "/CreateEnvironment") {
				c.Operations[i].RatePerMinute = 2
			}
		}
	})
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(s.edge.URL, p, token("free-retry-"+string(p)))
			ctx := ctxT(t)
			_, prj := project(t, c, "retry-"+string(p))
			create := func(name, key string) (*connect.Response[svcv1.CreateEnvironmentResponse], error) {
				r := req(&svcv1.CreateEnvironmentRequest{Name: name, BlueprintId: "redis-7", ProjectId: prj})
				r.Header().Set("Idempotency-Key", key)
				return c.Env.CreateEnvironment(ctx, r)
			}
			first, err := create("a", "key-a")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := create("b", "key-b"); err != nil {
				t.Fatal(err)
			}
			// The quota (2 running) and CreateEnvironment's rate (2 a
			// minute) are both spent; a new create is refused...
			if _, err := create("c", "key-c"); err == nil {
				t.Fatal("a third environment was created")
			}
			// ...but a retry of the first gets its answer again.
			again, err := create("a", "key-a")
			if err != nil {
				t.Fatalf("the retry: %v, want the replay", err)
			}
			if again.Msg.Environment.GetId() != first.Msg.Environment.Id || again.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the retry got %v (replayed %q), want the replay of %s", again.Msg.Environment, again.Header().Get("Idempotent-Replayed"), first.Msg.Environment.Id)
			}
			if n := running(t, c); n != 2 {
				t.Fatalf("the edge counts %d running environments, want 2", n)
			}
		})
	}
}

// TestEveryQuotaKeyInRedisExpires checks that no key the limits leave in
// Redis lives forever.
func TestEveryQuotaKeyInRedisExpires(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr
	cfg.Upstream.AdminURL = be.AdminURL
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "free-ttl")
	c := testkit.NewClients(e.URL, testkit.ConnectProto, tok)
	ctx := ctxT(t)
	_, prj := project(t, c, "ttl")
	a, err := createEnv(ctx, c, prj, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := createEnv(ctx, c, prj, "c"); err == nil {
		t.Fatal("a third environment was created")
	}
	if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: a})); err != nil {
		t.Fatal(err)
	}
	if _, err := reconciler(t, e).Pass(ctx); err != nil {
		t.Fatal(err)
	}
	rdb := redisClient(t, rs.Addr)
	keys, err := rdb.Keys(ctx, cfg.Redis.KeyPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"q:owner:", ":envs:running", ":envs:index", "rl:"} {
		if !strings.Contains(strings.Join(keys, " "), want) {
			t.Fatalf("no key %s among %v", want, keys)
		}
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 {
			t.Errorf("%s has no expiry (%v)", k, ttl)
		}
	}
}

func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// reconciler is a reconciliation of e's environment quotas with its backend
// (upstream.admin_url), on e's Redis and keys: its Pass does now what e's own
// reconciler does every limits.reconcile_interval.
func reconciler(t testing.TB, e *testkit.Edge) *reconcile.Reconciler {
	t.Helper()
	// Each Redis call gets the deadline the edge's own gives it: a first
	// call dials, which under -race on a busy machine takes longer than the
	// package default of 50ms.
	timeout := e.Config.Redis.PoolTimeout + 2*e.Config.Redis.Timeout
	envs := quota.NewEnvironments(redisClient(t, e.Config.Redis.Addr), quota.Options{KeyPrefix: e.Config.Redis.KeyPrefix, Timeout: timeout})
	r := reconcile.New(envs, e.Config.Upstream.AdminURL, e.Config.Limits.ReconcileInterval, slog.New(slog.DiscardHandler))
	r.Size = func() quota.Size { return quota.Size(e.Config.Limits.EnvironmentSize) }
	return r
}

func TestAStreamRefusedByTheStreamCapConsumesNoRate(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, func(c *config.Config) {
		for i, op := range c.Operations {
			if op.ConcurrentStreams > 0 {
				c.Operations[i].ConcurrentStreams = 1
			}
		}
	})
	for _, p := range []testkit.Protocol{testkit.GRPC, testkit.GRPCWeb, testkit.ConnectProto} {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(s.edge.URL, p, token("free-streams-"+string(p)))
			ctx := ctxT(t)
			_, prj := project(t, c, "streams-"+string(p))
			env, err := createEnv(ctx, c, prj, "w")
			if err != nil {
				t.Fatal(err)
			}
			watch := func() (*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse], error) {
				stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env}))
				if err != nil {
					return nil, err
				}
				if !stream.Receive() {
					stream.Close()
					return nil, stream.Err()
				}
				return stream, nil
			}
			open, err := watch()
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()
			res, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			before := res.Msg.ApiUsage.RequestsToday
			for range 5 {
				_, err := watch()
				wantError(t, err, connect.CodeResourceExhausted, "CONCURRENT_STREAMS_EXCEEDED", "edge")
			}
			res, err = c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Msg.ApiUsage.RequestsToday; got != before+1 {
				t.Fatalf("%d requests today after five refused streams, want %d (the GetUsage alone)", got, before+1)
			}
		})
	}
}

func TestSettleQuotaReleasesAnEnvironmentDeletedAroundTheEdgeAtOnce(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Upstream.AdminURL = be.AdminURL
	cfg.Limits.ReconcileInterval = time.Hour // only the operator's action can heal it in time
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "free-settle")
	c := testkit.NewClients(e.URL, testkit.GRPC, tok)
	ctx := ctxT(t)
	_, prj := project(t, c, "settle")
	a, err := createEnv(ctx, c, prj, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.NewClients(be.URL, testkit.ConnectProto, tok).Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: a})); err != nil {
		t.Fatal(err)
	}
	if n := running(t, c); n != 1 {
		t.Fatalf("before settling the edge counts %d, want the stale 1", n)
	}
	code, body := adminCall(t, "POST", e.AdminURL, "/admin/v1/subjects/"+url.PathEscape(subjectOf(t, tok))+"/settle-quota", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"released": 1`) {
		t.Fatalf("settle-quota: %d %s, want 1 released", code, body)
	}
	if n := running(t, c); n != 0 {
		t.Fatalf("after settling the edge counts %d running environments, want 0", n)
	}
}
