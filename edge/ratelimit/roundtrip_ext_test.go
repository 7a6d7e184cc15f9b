package ratelimit_test

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// scriptCalls is the server's count of EVALSHA and EVAL calls.
func scriptCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, stats, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		for field := range strings.SplitSeq(strings.TrimSpace(stats), ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				c, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", sc.Text(), err)
				}
				n += c
			}
		}
	}
	return n
}

// fewestScriptCalls runs f a few times and returns the fewest script calls
// the server counted during one run: other tests share the server, and they
// can only add calls.
func fewestScriptCalls(t *testing.T, rdb redis.UniversalClient, f func()) int64 {
	t.Helper()
	fewest := int64(-1)
	for range 5 {
		before := scriptCalls(t, rdb)
		f()
		n := scriptCalls(t, rdb) - before
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return fewest
}

func TestAnAdmittedRequestCostsOneRedisCall(t *testing.T) {
	rdb := testenv.Redis(t)
	l := ratelimit.New(rdb, ratelimit.Options{})
	// Every kind of limit at once: plan, operation, daily cap and counters.
	req := ratelimit.Request{Subject: testenv.Unique("trip"), Limits: []ratelimit.Limit{freePlan, createOp}, Daily: freeDaily}
	allow(t, l, req) // loads the script if no test did
	got := fewestScriptCalls(t, rdb, func() {
		if d := allow(t, l, req); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	})
	if got != 1 {
		t.Fatalf("an admitted request made %d script calls, want 1", got)
	}
}

func TestACachedRefusalCostsNoRedisCallUntilItsRetryTime(t *testing.T) {
	rdb := testenv.Redis(t)
	edge := newClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
	one := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 1}
	req := ratelimit.Request{Subject: testenv.Unique("trip-refused"), Limits: []ratelimit.Limit{one}}
	allow(t, l, req)
	if d := allow(t, l, req); d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("second request: %+v, want refused by Redis", d)
	}
	got := fewestScriptCalls(t, rdb, func() {
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
	got = fewestScriptCalls(t, rdb, func() {
		edge.Add(2 * time.Hour)
		if d := allow(t, l, req); d.Source != ratelimit.SourceRedis {
			t.Fatalf("after the retry time: %+v, want Redis to decide", d)
		}
	})
	if got != 1 {
		t.Fatalf("after the retry time a request made %d script calls, want 1", got)
	}
}
