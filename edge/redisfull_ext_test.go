package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
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
	iss := testkit.StartIssuer(t)
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
