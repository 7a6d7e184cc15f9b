package edge_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// redisTargets runs a limits test against one Redis and against the
// three-master cluster, side by side: each run has a stack of its own and
// its own key prefix.
func redisTargets(t *testing.T, test func(t *testing.T, useRedis func(*config.Config))) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		test(t, func(*config.Config) {}) // testkit.EdgeConfig's default
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		addrs := strings.Split(os.Getenv(testenv.RedisClusterAddrsVar), ",")
		testenv.RedisCluster(t) // skips or fails without one
		test(t, func(c *config.Config) { c.Redis.Addr, c.Redis.ClusterAddrs = "", addrs })
	})
}

const listOrgs = "/svc.v1.OrganizationService/ListOrganizations"

func TestFreePlanBurstThen429WithRetryAfterInEveryProtocol(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		s, token := startStack(t, orgsvc.Config{}, useRedis)
		// The protocols' subjects are apart: their subtests run at once
		// (each waits on a hundred calls), with tokens fetched here.
		protocols := []testkit.Protocol{testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb}
		tokens := map[testkit.Protocol]string{testkit.HTTPJSON: token("free-burst-json")}
		for _, p := range protocols {
			tokens[p] = token("free-burst-" + string(p))
		}
		t.Run("http-json", func(t *testing.T) {
			t.Parallel()
			tok := tokens[testkit.HTTPJSON]
			var res *http.Response
			var body map[string]any
			admitted := admitUntilRefused(t, func() bool {
				res, body = jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
				switch res.StatusCode {
				case http.StatusOK:
					return true
				case http.StatusTooManyRequests:
					return false
				}
				t.Fatalf("status %d %v", res.StatusCode, body)
				return false
			})
			t.Logf("admitted %d before the first 429", admitted)
			retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
			if err != nil || retry < 1 || retry > 2 {
				t.Fatalf("Retry-After %q", res.Header.Get("Retry-After"))
			}
			reset, _ := strconv.ParseInt(res.Header.Get("X-RateLimit-Reset"), 10, 64)
			// The free plan's bucket: a burst of 100, refilled at 60 a
			// minute, so full again 100 s after it is empty.
			if res.Header.Get("X-RateLimit-Limit") != "100" || res.Header.Get("X-RateLimit-Remaining") != "0" || reset < time.Now().Unix() {
				t.Fatalf("X-RateLimit-* %v", res.Header)
			}
			if p := res.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"plan";q=100;w=100`) || !strings.Contains(p, `"daily";q=10000;w=86400`) {
				t.Fatalf("RateLimit-Policy %q", p)
			}
			if rl := res.Header.Get("RateLimit"); !strings.Contains(rl, `"plan";r=0;t=`) {
				t.Fatalf("RateLimit %q", rl)
			}
			if body["code"] != "resource_exhausted" {
				t.Fatalf("body %v", body)
			}
			var reasons []string
			var delay string
			for _, d := range body["details"].([]any) {
				m := d.(map[string]any)
				switch m["@type"] {
				case "type.googleapis.com/google.rpc.ErrorInfo":
					reasons = append(reasons, m["reason"].(string))
				case "type.googleapis.com/google.rpc.RetryInfo":
					delay, _ = m["retryDelay"].(string)
				}
			}
			if len(reasons) != 1 || reasons[0] != "RATE_LIMIT_EXCEEDED" || delay != strconv.Itoa(retry)+"s" {
				t.Fatalf("ErrorInfo %v, RetryInfo %q (Retry-After %d)", reasons, delay, retry)
			}
			time.Sleep(time.Duration(retry) * time.Second) // what Retry-After tells the client to do
			if res, body := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
				t.Fatalf("after Retry-After: %d %v", res.StatusCode, body)
			}
		})
		for _, p := range protocols {
			t.Run(string(p), func(t *testing.T) {
				t.Parallel()
				c := testkit.NewClients(s.edge.URL, p, tokens[p])
				ctx := ctxT(t)
				var err error
				admitUntilRefused(t, func() bool {
					_, err = c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
					return err == nil
				})
				ce := wantError(t, err, connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "edge")
				var retry *errdetails.RetryInfo
				for _, d := range ce.Details() {
					if v, _ := d.Value(); v != nil {
						if ri, ok := v.(*errdetails.RetryInfo); ok {
							retry = ri
						}
					}
				}
				if retry == nil || retry.RetryDelay.AsDuration() < time.Second {
					t.Fatalf("RetryInfo %v", retry)
				}
				if got := ce.Meta().Get("Retry-After"); got != strconv.Itoa(int(retry.RetryDelay.AsDuration()/time.Second)) {
					t.Fatalf("Retry-After metadata %q for RetryInfo %v", got, retry.RetryDelay.AsDuration())
				}
			})
		}
	})
}

// admitUntilRefused sends calls until the first refusal and checks that a
// Free subject got its burst of 100 and no more than the plan's refill (60 a
// minute) over the time the burst took: GCRA admits exactly that.
func admitUntilRefused(t *testing.T, call func() (admitted bool)) int {
	t.Helper()
	start := time.Now()
	admitted := 0
	for call() {
		admitted++
		if admitted > 400 {
			t.Fatal("never refused")
		}
	}
	refill := int(time.Since(start)/time.Second) + 1
	if admitted < 100 || admitted > 100+refill {
		t.Fatalf("admitted %d before the first refusal, want the burst of 100 plus at most %d refilled", admitted, refill)
	}
	return admitted
}

// tinyPlan makes every subject's plan 20 at once and then 1 a minute, so
// that a test sees exact counts whatever its speed.
func tinyPlan(burst int) func(*config.Config) {
	return func(c *config.Config) {
		c.Limits.Plans = map[string]config.Plan{"tiny": {RequestsPerMinute: 1, Burst: burst}}
		c.Limits.DefaultPlan = "tiny"
	}
}

func TestTwoEdgesSharingRedisAdmitWhatOneWould(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		iss := testkit.SharedIssuer(t)
		be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		useRedis(cfg)
		tinyPlan(20)(cfg)
		// What is counted, not how early calls are held: on a busy machine
		// the 60 calls arrive over time, and those after a refusal would be
		// held until the plan's retry time (a minute) past the client's
		// patience (docs/limits.md, "Clients that ignore Retry-After").
		cfg.Listen.MaxEarlyCalls = 0
		a := testkit.StartEdge(t, cfg)
		cfgB := *cfg
		b := testkit.StartEdge(t, &cfgB) // same Redis, same key prefix: a second replica
		tok := testkit.Token(t, iss.URL(), "free-replicas")
		var admitted, refused atomic.Int32
		var wg sync.WaitGroup
		for i := range 60 {
			base := a.URL
			if i%2 == 1 {
				base = b.URL
			}
			wg.Go(func() {
				res, _ := jsonCall(t, base, tok, listOrgs, "{}")
				switch res.StatusCode {
				case http.StatusOK:
					admitted.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					t.Errorf("status %d", res.StatusCode)
				}
			})
		}
		wg.Wait()
		if admitted.Load() != 20 || refused.Load() != 40 {
			t.Fatalf("two replicas admitted %d and refused %d of 60, want 20 and 40", admitted.Load(), refused.Load())
		}
	})
}

// planRemaining reads the plan's remaining requests from the RateLimit field.
func planRemaining(t *testing.T, h http.Header) int {
	t.Helper()
	for _, item := range strings.Split(h.Get("RateLimit"), ",") {
		item = strings.TrimSpace(item)
		if rest, ok := strings.CutPrefix(item, `"plan";r=`); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ';')])
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no plan in RateLimit %q", h.Get("RateLimit"))
	return 0
}

func TestOperationLimitRefusesWithoutConsumingThePlan(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { useRedis(c); tinyPlan(100)(c) })
		tok := token("pro-searcher")
		const search = "/svc.v1.BlueprintService/SearchCatalog"
		start := time.Now()
		var res *http.Response
		var body map[string]any
		searches := 0
		for {
			res, body = jsonCall(t, s.edge.URL, tok, search, `{"query":"go"}`)
			if res.StatusCode != http.StatusOK {
				break
			}
			if searches++; searches > 100 {
				t.Fatal("never refused")
			}
		}
		// 30 at once, then one every 2 s.
		if refill := int(time.Since(start)/(2*time.Second)) + 1; searches < 30 || searches > 30+refill {
			t.Fatalf("%d searches passed, want 30 plus at most %d refilled", searches, refill)
		}
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(fmt.Sprint(body), "OPERATION_RATE_EXCEEDED") {
			t.Fatalf("refused search: %d %v", res.StatusCode, body)
		}
		if got := planRemaining(t, res.Header); got != 100-searches {
			t.Fatalf("after the refused search the plan has %d left, want %d: a refusal must consume nothing", got, 100-searches)
		}
		res, _ = jsonCall(t, s.edge.URL, tok, listOrgs, "{}")
		if got := planRemaining(t, res.Header); got != 99-searches {
			t.Fatalf("the next admitted call leaves %d, want %d", got, 99-searches)
		}
	})
}

func TestEleventhCreateEnvironmentInAMinuteIsRefused(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("pro-builder"))
	ctx := ctxT(t)
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "builders", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	// CreateEnvironment's limit is 10 a minute with a burst of 10: the
	// first ten are admitted at once, and one more each 6 s after the
	// first. On a quiet machine the eleventh is refused; on a busy one the
	// ten may take longer than 6 s, and a correct edge admits the calls
	// the minute's rate allows by then, and no more.
	const burst, interval = 10, 6 * time.Second
	start := time.Now()
	for i := range burst {
		if _, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: fmt.Sprintf("e%d", i), BlueprintId: "go-api", ProjectId: prj.Msg.Id})); err != nil {
			t.Fatalf("environment %d: %v", i+1, err)
		}
	}
	for admitted := burst; ; admitted++ {
		_, err = c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: fmt.Sprintf("e%d", admitted), BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
		allowed := burst + int(time.Since(start)/interval)
		if err == nil {
			if admitted+1 > allowed {
				t.Fatalf("environment %d admitted %v after the first: more than the %d that 10 a minute allows by then", admitted+1, time.Since(start), allowed)
			}
			continue
		}
		wantError(t, err, connect.CodeResourceExhausted, "OPERATION_RATE_EXCEEDED", "edge")
		return
	}
}

func TestFreeSubjectsThirdConcurrentEnvironmentIsRefusedUntilOneIsDeleted(t *testing.T) {
	t.Parallel()
	redisTargets(t, func(t *testing.T, useRedis func(*config.Config)) {
		s, token := startStack(t, orgsvc.Config{}, useRedis)
		for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.GRPC, testkit.GRPCWeb} {
			t.Run(string(p), func(t *testing.T) {
				c := testkit.NewClients(s.edge.URL, p, token("free-envs-"+string(p)))
				ctx := ctxT(t)
				org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "quota-" + string(p), BillingEmail: "a@b.example"}))
				if err != nil {
					t.Fatal(err)
				}
				prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
				if err != nil {
					t.Fatal(err)
				}
				create := func(name string) (*connect.Response[svcv1.CreateEnvironmentResponse], error) {
					return c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: name, BlueprintId: "redis-7", ProjectId: prj.Msg.Id}))
				}
				first, err := create("one")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := create("two"); err != nil {
					t.Fatal(err)
				}
				_, err = create("three")
				ce := wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
				var qf *errdetails.QuotaFailure
				for _, d := range ce.Details() {
					if v, _ := d.Value(); v != nil {
						if q, ok := v.(*errdetails.QuotaFailure); ok {
							qf = q
						}
					}
				}
				if qf == nil || len(qf.Violations) != 1 || qf.Violations[0].Description == "" {
					t.Fatalf("QuotaFailure %v", qf)
				}
				// A backend refusal gives the reservation back.
				if _, err := create("one"); err == nil {
					t.Fatal("a duplicate name was created")
				}
				if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: first.Msg.Environment.Id})); err != nil {
					t.Fatal(err)
				}
				if _, err := create("three"); err != nil {
					t.Fatalf("after deleting one: %v", err)
				}
				usage, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
				if err != nil {
					t.Fatal(err)
				}
				u := usage.Msg
				// Seven calls counted: the quota's refusal consumed nothing.
				if u.ResourceUsage.Environments != 2 || u.ApiUsage.Limits.RequestsPerMinute != 60 || u.ApiUsage.Limits.RequestsPerDay != 10000 || u.ApiUsage.RequestsToday != 7 || u.ApiUsage.RequestsThisMonth < u.ApiUsage.RequestsToday {
					t.Fatalf("usage %v", u)
				}
				// The free plan's quotas (config.Default), beside the usage.
				if q := u.ResourceUsage.Quotas; q.GetConcurrentEnvironments() != 2 || q.GetEnvironmentsPerMonth() != 10 || q.GetVcpuHoursPerMonth() != 100 || q.GetMemoryGbHoursPerMonth() != 200 {
					t.Fatalf("quotas %v, want the free plan's (2, 10, 100, 200)", q)
				}
			})
		}
	})
}

// startChildEdge runs an edge in a process of its own, to kill it.
func startChildEdge(t *testing.T, cfg *config.Config) (string, *exec.Cmd) {
	t.Helper()
	api, _, _, cmd := startChildEdgeDebug(t, cfg)
	return api, cmd
}

// startChildEdgeDebug is startChildEdge that also returns the child's admin
// URL and the URL of its test-only debug listener, which collects garbage
// and reports the child's live heap and goroutines (childHeap).
func startChildEdgeDebug(t *testing.T, cfg *config.Config) (api, admin, debug string, _ *exec.Cmd) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childConfigVar+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child edge: %v", err)
	}
	api, rest, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "LISTENING ")), " ADMIN ")
	admin, debug, _ = strings.Cut(rest, " DEBUG ")
	return api, admin, debug, cmd
}

func TestTwentyStreamsPassTheTwentyFirstIsRefusedAndACrashedEdgeFreesThem(t *testing.T) {
	t.Parallel()
	redisTargets(t, twentyStreamsAndACrash)
}

func twentyStreamsAndACrash(t *testing.T, useRedis func(*config.Config)) {
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{ProvisionDelay: time.Hour})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	useRedis(cfg)
	cfg.Limits.StreamLease = 3 * time.Second
	childURL, child := startChildEdge(t, cfg)
	survivor := testkit.StartEdge(t, cfg) // another replica, same Redis and prefix

	tok := testkit.Token(t, iss.URL(), "enterprise-watcher")
	ctx := ctxT(t)
	setup := testkit.NewClients(survivor.URL, testkit.ConnectProto, tok)
	org, err := setup.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "watch", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := setup.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := setup.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	watch := func(base string) (*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse], error) {
		stream, err := testkit.NewClients(base, testkit.GRPC, tok).Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
		if err != nil {
			return nil, err
		}
		if !stream.Receive() {
			stream.Close()
			return nil, stream.Err()
		}
		return stream, nil
	}
	for i := range 20 {
		if _, err := watch(childURL); err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
	}
	_, err = watch(survivor.URL)
	wantError(t, err, connect.CodeResourceExhausted, "CONCURRENT_STREAMS_EXCEEDED", "edge")

	if err := child.Process.Kill(); err != nil { // a crash: no lease is released
		t.Fatal(err)
	}
	_ = child.Wait()
	killed := time.Now()
	for {
		stream, err := watch(survivor.URL)
		if err == nil {
			stream.Close()
			break
		}
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
			t.Fatalf("while waiting for the leases to expire: %v", err)
		}
		if time.Since(killed) > 2*cfg.Limits.StreamLease {
			t.Fatalf("the crashed edge's leases were not freed within the lease period (%v)", cfg.Limits.StreamLease)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOneRedisRoundTripPerAdmittedPlainUnaryCall(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		rs := testkit.StartRedisServer(t)
		s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Redis.Addr = rs.Addr })
		redisBefore := rs.Calls(t)
		n := countRoundTrips(t, s, token("pro-counted"))
		// Redis agrees: one script call each (the commands the script runs
		// inside are counted by INFO too, but are not round trips; the
		// first call also loads the script).
		if got := rs.Calls(t)["evalsha"] - redisBefore["evalsha"]; got != n+1 {
			t.Fatalf("Redis ran EVALSHA %d times for %d calls", got, n+1)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := strings.Split(os.Getenv(testenv.RedisClusterAddrsVar), ",")
		testenv.RedisCluster(t)
		s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Redis.Addr, c.Redis.ClusterAddrs = "", addrs })
		countRoundTrips(t, s, token("pro-counted"))
	})
}

// countRoundTrips sends plain unary calls through the edge and checks, from
// the edge's own metric, that each cost one round trip to Redis.
func countRoundTrips(t *testing.T, s *stack, tok string) int {
	t.Helper()
	roundTrips := func() float64 {
		res, err := http.Get(s.edge.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return metricValue(t, string(b), "edge_redis_round_trips_total")
	}
	jsonCall(t, s.edge.URL, tok, listOrgs, "{}") // loads the script
	before := roundTrips()
	const n = 25
	for range n {
		if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	if got := roundTrips() - before; got != n {
		t.Fatalf("%d admitted calls made %v round trips to Redis, want %d", n, got, n)
	}
	return n
}

func TestRedisOutageFailOpenKeepsALocalShareFailClosedRefusesAndExactLimitsResume(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	edgeWith := func(policy config.FailureMode) *testkit.Edge {
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		cfg.Redis.Addr = rs.Addr
		tinyPlan(10)(cfg)
		cfg.Limits.OnRedisFailure, cfg.Limits.LocalShare = policy, 0.5
		// The client calls on past its refusals on purpose, on one
		// connection: the edge would hold its early calls (listen.
		// max_early_calls), which is not what this test is about.
		cfg.Listen.MaxEarlyCalls = 0
		return testkit.StartEdge(t, cfg)
	}
	open, closed := edgeWith(config.FailOpen), edgeWith(config.FailClosed)
	tokOpen, tokClosed := testkit.Token(t, iss.URL(), "free-outage-open"), testkit.Token(t, iss.URL(), "free-outage-closed")

	rs.Stop()
	admitted := 0
	for range 10 {
		res, body := jsonCall(t, open.URL, tokOpen, listOrgs, "{}")
		switch res.StatusCode {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("fail_open answered %d %v", res.StatusCode, body)
		}
	}
	if admitted != 5 {
		t.Fatalf("fail_open admitted %d of 10 with a local share of 0.5 of a burst of 10, want 5", admitted)
	}
	metrics := func() string {
		res, err := http.Get(open.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	if m := metrics(); !strings.Contains(m, "edge_fail_open_active 1") || !strings.Contains(m, `edge_redis_breaker_state{state="open"} 1`) {
		t.Fatalf("metrics do not show the outage:\n%s", grepLines(m, "edge_fail_open_active", "edge_redis_breaker_state"))
	}
	callsBefore := metricValue(t, metrics(), "edge_redis_calls_total")
	for range 5 {
		jsonCall(t, open.URL, tokOpen, listOrgs, "{}")
	}
	if got := metricValue(t, metrics(), "edge_redis_calls_total"); got != callsBefore {
		t.Fatalf("with the breaker open, requests still called Redis (%v -> %v): each would wait for a timeout", callsBefore, got)
	}
	res, body := jsonCall(t, closed.URL, tokClosed, listOrgs, "{}")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body), "LIMITS_UNAVAILABLE") {
		t.Fatalf("fail_closed answered %d %v", res.StatusCode, body)
	}

	rs.Start()
	// The breaker lets a probe through after its cool-down; then Redis decides again.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(metrics(), "edge_fail_open_active 0") {
		if time.Now().After(deadline) {
			t.Fatal("fail-open did not end after Redis came back")
		}
		jsonCall(t, open.URL, tokOpen, listOrgs, "{}")
		time.Sleep(200 * time.Millisecond)
	}
	res, _ = jsonCall(t, open.URL, testkit.Token(t, iss.URL(), "free-after-outage"), listOrgs, "{}")
	if res.StatusCode != http.StatusOK || res.Header.Get("X-RateLimit-Remaining") != "9" {
		t.Fatalf("after recovery: %d, remaining %q; want Redis's exact count, 9", res.StatusCode, res.Header.Get("X-RateLimit-Remaining"))
	}
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

func metricValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestRateLimitHeadersNeverSayMoreIsLeftThanTheLimit: for a fresh subject
// of every plan, X-RateLimit-Remaining is at most X-RateLimit-Limit, and
// each limit's r in RateLimit at most its q in RateLimit-Policy, so that a
// client computing "used = limit - remaining" never gets a negative number
// (a fresh pro subject saw Remaining 499 with Limit 300).
func TestRateLimitHeadersNeverSayMoreIsLeftThanTheLimit(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	field := func(list, name, param string) int {
		for _, item := range strings.Split(list, ",") {
			parts := strings.Split(strings.TrimSpace(item), ";")
			if parts[0] != strconv.Quote(name) {
				continue
			}
			for _, p := range parts[1:] {
				if v, ok := strings.CutPrefix(p, param+"="); ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("%s of %s in %q: %v", param, name, list, err)
					}
					return n
				}
			}
		}
		t.Fatalf("no %s of %s in %q", param, name, list)
		return 0
	}
	for _, plan := range []string{"free", "pro", "enterprise"} {
		res, _ := jsonCall(t, s.edge.URL, token(plan+"-fresh-headers"), listOrgs, "{}")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", plan, res.StatusCode)
		}
		limit, err1 := strconv.Atoi(res.Header.Get("X-RateLimit-Limit"))
		left, err2 := strconv.Atoi(res.Header.Get("X-RateLimit-Remaining"))
		if err1 != nil || err2 != nil || left > limit || left < 0 {
			t.Fatalf("%s: X-RateLimit-Limit %q, X-RateLimit-Remaining %q", plan, res.Header.Get("X-RateLimit-Limit"), res.Header.Get("X-RateLimit-Remaining"))
		}
		policy, standing := res.Header.Get("RateLimit-Policy"), res.Header.Get("RateLimit")
		names := []string{"plan", "daily"}
		if plan == "enterprise" {
			names = names[:1] // no daily cap
		}
		for _, name := range names {
			if q, r := field(policy, name, "q"), field(standing, name, "r"); r > q || r < 0 {
				t.Fatalf("%s: %s has r=%d of q=%d (RateLimit %q, RateLimit-Policy %q)", plan, name, r, q, standing, policy)
			}
		}
		t.Logf("%s: X-RateLimit-Limit %d, Remaining %d; RateLimit-Policy %s", plan, limit, left, policy)
	}
}
