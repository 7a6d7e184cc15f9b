package ratelimit_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// countedRedis returns a client of the real Redis whose script calls are
// counted by a go-redis hook: this client's only, whoever else shares the
// server.
func countedRedis(t *testing.T) (redis.UniversalClient, *testenv.RoundTrips) {
	t.Helper()
	rdb := testenv.Redis(t)
	trips := &testenv.RoundTrips{}
	rdb.AddHook(trips)
	return rdb, trips
}

// scriptCalls counts the script calls f makes.
func scriptCalls(trips *testenv.RoundTrips, f func()) int64 {
	before := trips.Scripts()
	f()
	return trips.Scripts() - before
}

func TestAnAdmittedRequestCostsOneRedisCall(t *testing.T) {
	rdb, trips := countedRedis(t)
	l := ratelimit.New(rdb, ratelimit.Options{})
	// Every kind of limit at once: plan, operation, daily cap and counters.
	req := ratelimit.Request{Subject: testenv.Unique("trip"), Limits: []ratelimit.Limit{freePlan, createOp}, Daily: freeDaily}
	allow(t, l, req) // loads the script if no test did
	got := scriptCalls(trips, func() {
		if d := allow(t, l, req); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	})
	if got != 1 {
		t.Fatalf("an admitted request made %d script calls, want 1", got)
	}
}

func TestACachedRefusalCostsNoRedisCallUntilItsRetryTime(t *testing.T) {
	rdb, trips := countedRedis(t)
	edge := newClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
	one := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 1}
	req := ratelimit.Request{Subject: testenv.Unique("trip-refused"), Limits: []ratelimit.Limit{one}}
	allow(t, l, req)
	if d := allow(t, l, req); d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("second request: %+v, want refused by Redis", d)
	}
	got := scriptCalls(trips, func() {
		for range 10 {
			if d := allow(t, l, req); d.Allowed || d.Source != ratelimit.SourceCache {
				t.Fatalf("%+v, want refused from the cache", d)
			}
		}
	})
	if got != 0 {
		t.Fatalf("10 refusals from the cache made %d script calls, want 0", got)
	}
	// Past the retry time (edge clock), Redis decides again: one call each.
	got = scriptCalls(trips, func() {
		edge.Add(2 * time.Hour)
		if d := allow(t, l, req); d.Source != ratelimit.SourceRedis {
			t.Fatalf("after the retry time: %+v, want Redis to decide", d)
		}
	})
	if got != 1 {
		t.Fatalf("after the retry time a request made %d script calls, want 1", got)
	}
}
