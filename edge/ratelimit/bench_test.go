package ratelimit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// BenchmarkAllowRealRedis is one admitted request of a Free subject with a
// plan limit, an operation limit and the daily cap: one EVALSHA against the
// real redis-server, round trip included. redis-µs/op is the time Redis
// spent in the script (INFO commandstats), which the round trip hides:
// what every call costs the one Redis all replicas share.
func BenchmarkAllowRealRedis(b *testing.B) {
	rdb := testenv.Redis(b)
	l := ratelimit.New(rdb, ratelimit.Options{Timeout: time.Second})
	req := ratelimit.Request{
		Subject: testenv.Unique("bench"),
		Limits: []ratelimit.Limit{
			{Name: "plan", Rate: 1 << 30, Period: time.Minute, Burst: 1 << 30},
			{Name: "op:SearchCatalog", Rate: 1 << 30, Period: time.Minute, Burst: 1 << 30},
		},
		Daily: 1 << 30,
	}
	ctx := context.Background()
	if d, err := l.Allow(ctx, req); err != nil || !d.Allowed { // loads the script, makes the counters
		b.Fatal(d, err)
	}
	calls, usec := scriptStats(b, rdb)
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Allow(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
	b.StopTimer()
	calls2, usec2 := scriptStats(b, rdb)
	if calls2 > calls {
		b.ReportMetric(float64(usec2-usec)/float64(calls2-calls), "redis-µs/op")
	}
}

// scriptStats reads how many script calls the server ran and the
// microseconds it spent in them.
func scriptStats(b *testing.B, rdb redis.UniversalClient) (calls, usec int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls, usec
}

// BenchmarkRefusedFromCache is a subject known to be over its limit: refused
// without asking Redis.
func BenchmarkRefusedFromCache(b *testing.B) {
	l := ratelimit.New(testenv.Redis(b), ratelimit.Options{Timeout: time.Second})
	req := ratelimit.Request{Subject: testenv.Unique("bench"), Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 1}}}
	ctx := context.Background()
	if d, _ := l.Allow(ctx, req); !d.Allowed {
		b.Fatal("first request refused")
	}
	if d, _ := l.Allow(ctx, req); d.Allowed {
		b.Fatal("second request allowed")
	}
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := l.Allow(ctx, req); d.Allowed || d.Source != ratelimit.SourceCache {
			b.Fatal(d)
		}
	}
}
