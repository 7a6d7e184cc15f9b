package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
	"github.com/orgedge/edge/orgsvc/store"
)

// fullableRedis is a redis-server of the test's own with a small maxmemory
// and noeviction, as production runs it, which the test fills until Redis
// refuses writes (OOM) and empties again.
type fullableRedis struct {
	*testenv.RedisProcess
	c *redis.Client
	n int // junk keys written
}

func startFullableRedis(t *testing.T) *fullableRedis {
	t.Helper()
	rs := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
		Args: func(port int, dir string) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
				"--maxmemory", "16mb", "--maxmemory-policy", "noeviction"}
		},
	})
	c := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return &fullableRedis{RedisProcess: rs, c: c}
}

// fill writes junk until Redis refuses a write for want of memory, then
// lowers maxmemory 2 MB under what Redis uses: full with a margin, so that
// the memory Redis frees on its own (client buffers) does not let a write
// through.
func (r *fullableRedis) fill(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	junk := strings.Repeat("x", 64<<10)
	for {
		err := r.c.Set(ctx, fmt.Sprintf("junk:%d", r.n), junk, 0).Err()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatalf("filling Redis: %v", err)
			}
			break
		}
		r.n++
	}
	info, err := r.c.InfoMap(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used, err := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	if err != nil {
		t.Fatalf("used_memory: %v", err)
	}
	if err := r.c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-2<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Set(ctx, "junk:probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("Redis still takes a small write after the fill: %v", err)
	}
}

// empty removes the junk: Redis takes writes again.
func (r *fullableRedis) empty(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < r.n; i += 500 {
		var keys []string
		for j := i; j < min(i+500, r.n); j++ {
			keys = append(keys, fmt.Sprintf("junk:%d", j))
		}
		if err := r.c.Del(ctx, keys...).Err(); err != nil {
			t.Fatalf("emptying Redis: %v", err)
		}
	}
	r.n = 0
	if err := r.c.ConfigSet(ctx, "maxmemory", "16mb").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestGetUsageAnswersWhileRedisIsFull: with Redis at maxmemory under
// noeviction, every limit check fails (the script writes), the breaker
// opens and calls are decided locally; GetUsage only reads, which a full
// Redis still serves, so it answers with the counts Redis holds.
func TestGetUsageAnswersWhileRedisIsFull(t *testing.T) {
	t.Parallel()
	rs := startFullableRedis(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), testenv.Unique("free-full"))

	for i := range 3 {
		if res, body := jsonCall(t, e.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %v", i, res.StatusCode, body)
		}
	}
	rs.fill(t)
	// Enough failed limit checks to open the breaker.
	for i := range 8 {
		if res, body := jsonCall(t, e.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("call %d with Redis full (fail_open): %d %v", i, res.StatusCode, body)
		}
	}
	if m := scrapeAdmin(t, e.AdminURL); !containsLine(m, "edge_fail_open_active 1") {
		t.Fatalf("the breaker did not open with Redis full:\n%s", grepLines(m, "edge_fail_open_active", "edge_redis_breaker"))
	}
	res, body := jsonCall(t, e.URL, tok, getUsage, "{}")
	usage, _ := body["apiUsage"].(map[string]any)
	if res.StatusCode != http.StatusOK || usage["requestsToday"] != float64(3) {
		t.Fatalf("GetUsage with Redis full: %d %v; want 200 and the 3 requests Redis counted before it filled", res.StatusCode, body)
	}
	start := time.Now()
	rs.Kill()
	// Redis gone: the read is refused at once, not retried per call.
	if res, body := jsonCall(t, e.URL, tok, getUsage, "{}"); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GetUsage with Redis down: %d %v, want 503", res.StatusCode, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("GetUsage with Redis down took %v", took)
	}
}

// TestAFreeSubjectNeverEndsWithMoreEnvironmentsThanItsQuotaWhenRedisFills:
// a free subject (2 concurrent environments) creates one; its second is
// created at the backend while Redis fills up, so that the edge's
// confirmation is refused (OOM). While Redis is full, its third
// CreateEnvironment is refused; another subject's is either refused
// (unavailable: its quota cannot be checked) or reserved, and then counted
// once Redis has room. Once Redis has room again, the refused confirmation goes in
// (GetUsage counts 2), and the third environment is refused by the quota:
// the backend holds exactly 2.
func TestAFreeSubjectNeverEndsWithMoreEnvironmentsThanItsQuotaWhenRedisFills(t *testing.T) {
	t.Parallel()
	rs := startFullableRedis(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	up := testkit.StartFaultProxy(t, strings.TrimPrefix(be.URL, "http://"))
	cfg := testkit.EdgeConfig(t, "http://"+up.Addr, iss.URL())
	cfg.Redis.Addr = rs.Addr
	e := testkit.StartEdge(t, cfg)
	c := testkit.NewClients(e.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), testenv.Unique("free-fills")))
	ctx := ctxT(t)
	_, prj := project(t, c, "fills")
	if _, err := createEnv(ctx, c, prj, "e1"); err != nil {
		t.Fatal(err)
	}
	other := testkit.NewClients(e.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), testenv.Unique("free-fills-other")))
	_, otherPrj := project(t, other, "fills-other")

	// The second: the backend creates it, its answer is held until Redis
	// is full.
	up.Stall()
	second := make(chan error, 1)
	go func() {
		_, err := createEnv(ctx, c, prj, "e2")
		second <- err
	}()
	testkit.WaitFor(t, "the second environment's reservation in Redis", func() bool {
		n, err := rs.c.Eval(ctx, `local n = 0
for _, k in ipairs(redis.call('KEYS', '*:envs:pending')) do n = n + redis.call('ZCARD', k) end
return n`, nil).Int()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	// The request is on its way to the backend; wait until it is there.
	envs := func() int {
		t.Helper()
		list, _, err := be.Store.ListEnvironments(ctx, store.EnvironmentFilter{ProjectID: prj}, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	testkit.WaitFor(t, "the backend to create the second environment", func() bool { return envs() == 2 })
	rs.fill(t)
	up.Heal()
	if err := <-second; err != nil {
		t.Fatalf("the second environment: %v", err)
	}

	if _, err := createEnv(ctx, c, prj, "full"); err == nil {
		t.Fatal("a third environment was created while Redis was full")
	}
	// Another subject: Redis takes its small reservation (a script's first
	// write in a full Redis may pass) but not its confirmation.
	otherEnvs := 0
	if _, err := createEnv(ctx, other, otherPrj, "full"); err == nil {
		otherEnvs = 1
	} else {
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
	}

	rs.empty(t)
	for deadline := time.Now().Add(20 * time.Second); running(t, c) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the refused confirmation never went in: GetUsage counts %d running environments, the backend holds 2", running(t, c))
		}
		time.Sleep(500 * time.Millisecond) // GetUsage spends the free plan's rate

	}
	_, err := createEnv(ctx, c, prj, "e3")
	wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
	if n := envs(); n != 2 {
		t.Fatalf("the backend holds %d environments of a free subject, want 2", n)
	}
	if list, _, err := be.Store.ListEnvironments(ctx, store.EnvironmentFilter{ProjectID: otherPrj}, store.Page{}); err != nil || len(list) != otherEnvs {
		t.Fatalf("the other subject has %d environments (%v), want %d", len(list), err, otherEnvs)
	}
	if n := running(t, other); n != otherEnvs {
		t.Fatalf("GetUsage counts %d running environments for the other subject, the backend holds %d", n, otherEnvs)
	}
}
