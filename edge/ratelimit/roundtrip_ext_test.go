package ratelimit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
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

// commandCalls is the server's count of calls per command, scripts' own
// commands included.
func commandCalls(t *testing.T, rdb redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// An admitted request of one plan limit and a daily cap costs Redis as
// little as it can while deciding exactly as redis_rate does: the clock,
// one read of the subject's hash (the limit's state and interval, the plan
// charged, the day's and month's counts) and one write of it (the script is
// atomic: the counts are written as read plus the cost). (redis_rate's
// Allow runs TIME, GET, SET.) The day's first request also renews the
// hash's expiry and drops what is past.
func TestAnAdmittedRequestRunsThreeRedisCommands(t *testing.T) {
	srv := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	l := ratelimit.New(rdb, ratelimit.Options{})
	req := ratelimit.Request{Subject: "commands", Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily, Policy: "free"}
	allow(t, l, req) // loads the script, makes the counters
	before := commandCalls(t, rdb)
	if d := allow(t, l, req); !d.Allowed {
		t.Fatalf("%+v", d)
	}
	after := commandCalls(t, rdb)
	var inScript int64
	var ran []string
	for name, n := range after {
		if d := n - before[name]; d > 0 && name != "info" && name != "evalsha" {
			inScript += d
			ran = append(ran, fmt.Sprintf("%s×%d", name, d))
		}
	}
	if after["evalsha"]-before["evalsha"] != 1 || inScript != 3 {
		t.Fatalf("an admitted request ran %d script call(s) and %d commands in it (%v), want 1 and 3",
			after["evalsha"]-before["evalsha"], inScript, ran)
	}
	ttl, err := rdb.TTL(context.Background(), "rl:{"+subjectTag("commands")+"}:s").Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("the subject's counters have TTL %v (%v), want one", ttl, err)
	}

	// The policy charged is what Peek reports; a request charged under
	// another one replaces it, a refused one does not.
	peek := func() string {
		t.Helper()
		d, err := l.Peek(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return d.Policy
	}
	if got := peek(); got != "free" {
		t.Fatalf("Peek's Policy = %q, want free", got)
	}
	pro := req
	pro.Policy, pro.Limits = "pro", []ratelimit.Limit{{Name: "plan", Rate: 300, Period: time.Minute, Burst: 500}}
	allow(t, l, pro)
	if got := peek(); got != "pro" {
		t.Fatalf("Peek's Policy = %q after a request charged under pro", got)
	}
	tiny := req
	tiny.Policy, tiny.Cost = "tiny", 1000
	if d := allow(t, l, tiny); d.Allowed {
		t.Fatalf("a request of cost 1000 admitted: %+v", d)
	}
	if got := peek(); got != "pro" {
		t.Fatalf("Peek's Policy = %q after a refused request, want pro still", got)
	}
}

// subjectTag is the hash tag of a subject's keys.
func subjectTag(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return hex.EncodeToString(sum[:16])
}
