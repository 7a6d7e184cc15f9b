package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// TestRefusalCacheHoldsItsBound: five subjects refused by Redis, a cache of
// three: three remembered, two evicted.
func TestRefusalCacheHoldsItsBound(t *testing.T) {
	rdb := testenv.RedisTargets()["redis"](t)
	l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: 3})
	hourly := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 1}
	for i := range 5 {
		req := ratelimit.Request{Subject: testenv.Unique(fmt.Sprint("full-", i)), Limits: []ratelimit.Limit{hourly}}
		allow(t, l, req)
		if d := allow(t, l, req); d.Allowed || d.Source != ratelimit.SourceRedis {
			t.Fatalf("subject %d: %+v, want refused by Redis", i, d)
		}
	}
	if got, want := testenv.CacheStats(l)["refusal"], (testenv.CacheStat{Entries: 3, Bound: 3, Evictions: 2}); got != want {
		t.Errorf("refusal cache %+v, want %+v", got, want)
	}
}

// TestLocalLimitersHoldTheirBound: while Redis is down, five subjects
// decided locally with room for three: three limiters and daily counts
// kept, two of each evicted.
func TestLocalLimitersHoldTheirBound(t *testing.T) {
	rdb, _ := countedClient(t, testkit.DeadAddr(t))
	l := ratelimit.New(rdb, ratelimit.Options{LocalEntries: 3, FailureThreshold: 1, Logger: (&logBuffer{}).Logger()})
	for i := range 5 {
		req := ratelimit.Request{Subject: testenv.Unique(fmt.Sprint("local-", i)), Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily}
		allow(t, l, req)
	}
	s := testenv.CacheStats(l)
	for _, name := range []string{"local_rate", "local_day"} {
		if got, want := s[name], (testenv.CacheStat{Entries: 3, Bound: 3, Evictions: 2}); got != want {
			t.Errorf("%s %+v, want %+v", name, got, want)
		}
	}
}
