package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// BenchmarkAllowRealRedis is one admitted request of a Free subject with a
// plan limit, an operation limit and the daily cap: one EVALSHA against the
// real redis-server, round trip included.
func BenchmarkAllowRealRedis(b *testing.B) {
	l := ratelimit.New(testenv.Redis(b), ratelimit.Options{Timeout: time.Second})
	req := ratelimit.Request{
		Subject: testenv.Unique("bench"),
		Limits: []ratelimit.Limit{
			{Name: "plan", Rate: 1 << 30, Period: time.Minute, Burst: 1 << 30},
			{Name: "op:SearchCatalog", Rate: 1 << 30, Period: time.Minute, Burst: 1 << 30},
		},
		Daily: 1 << 30,
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Allow(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
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
