package edge_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
)

// TestOneClusterMasterKilledWhileCallsFlow kills the Redis Cluster master
// holding a subject's keys while two subjects call through an edge under
// fail_open and one under fail_closed, then starts it again. Every call is
// answered, in time, with what the policy promises (docs/limits.md): ok
// under fail_open (the edge reports fail-open), ok or unavailable
// LIMITS_UNAVAILABLE under fail_closed; never another error. Once the
// master is back and the cluster whole, Redis decides again.
func TestOneClusterMasterKilledWhileCallsFlow(t *testing.T) {
	t.Parallel()
	cluster := testkit.StartRedisCluster(t)
	iss := testkit.SharedIssuer(t)
	up := startOKUpstream(t)
	edgeWith := func(policy config.FailureMode) *testkit.Edge {
		cfg := testkit.EdgeConfig(t, up, iss.URL())
		cfg.Redis.Addr, cfg.Redis.ClusterAddrs = "", cluster.Addrs()
		cfg.Redis.Timeout = outageTimeout
		cfg.Limits.OnRedisFailure = policy
		cfg.Limits.Plans = map[string]config.Plan{"roomy": {RequestsPerMinute: 100_000, Burst: 100_000}}
		cfg.Limits.DefaultPlan = "roomy"
		return testkit.StartEdge(t, cfg)
	}
	edges := map[config.FailureMode]*testkit.Edge{config.FailOpen: edgeWith(config.FailOpen), config.FailClosed: edgeWith(config.FailClosed)}
	toks := []string{testkit.Token(t, iss.URL(), "free-cluster-a"), testkit.Token(t, iss.URL(), "free-cluster-b")}
	sum := sha256.Sum256([]byte(subjectOf(t, toks[0])))
	victim := cluster.MasterOf(t, "{"+hex.EncodeToString(sum[:])[:32]+"}")

	type tally struct {
		mu    sync.Mutex
		codes map[string]int
	}
	tallies := map[config.FailureMode]*tally{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for policy, e := range edges {
		tl := &tally{codes: map[string]int{}}
		tallies[policy] = tl
		for i := range 4 {
			wg.Go(func() {
				c := testkit.NewClients(e.URL, testkit.ConnectProto, toks[i%2])
				for !stop.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
					cancel()
					tl.mu.Lock()
					tl.codes[answerOf(err)]++
					tl.mu.Unlock()
				}
			})
		}
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	// Kill the master once calls flow through both edges.
	for flowing := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		for _, tl := range tallies {
			tl.mu.Lock()
			if tl.codes["ok"] >= 10 {
				n++
			}
			tl.mu.Unlock()
		}
		if n == len(tallies) {
			break
		}
		if time.Now().After(flowing) {
			t.Fatal("calls do not flow before the outage")
		}
	}
	victim.Stop()

	open := edges[config.FailOpen].AdminURL + "/metrics"
	testkit.ScrapeUntil(t, open, "fail-open after a master died", func(m testkit.Samples) bool { return m.Sum("edge_fail_open_active") == 1 })
	deadline := time.Now().Add(20 * time.Second)
	for {
		tl := tallies[config.FailClosed]
		tl.mu.Lock()
		n := tl.codes["unavailable/LIMITS_UNAVAILABLE"]
		tl.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fail_closed never answered LIMITS_UNAVAILABLE with a master dead")
		}
		time.Sleep(50 * time.Millisecond)
	}

	victim.Start()
	cluster.WaitHealthy(t)
	testkit.ScrapeUntil(t, open, "exact limits after the master came back", func(m testkit.Samples) bool {
		return m.Sum("edge_fail_open_active") == 0 && m.Sum("edge_redis_breaker_state", "state", "closed") == 1
	})
	stop.Store(true)
	wg.Wait()
	for policy, tl := range tallies {
		t.Logf("%s: %v", policy, tl.codes)
		for answer, n := range tl.codes {
			ok := answer == "ok" || policy == config.FailClosed && answer == "unavailable/LIMITS_UNAVAILABLE"
			if !ok {
				t.Errorf("%s: %d calls answered %s", policy, n, answer)
			}
		}
	}
}

// answerOf names what a caller saw: ok, or the code and the ErrorInfo
// reason.
func answerOf(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return "transport: " + err.Error()
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ce.Code().String() + "/" + ei.Reason
			}
		}
	}
	return ce.Code().String()
}
