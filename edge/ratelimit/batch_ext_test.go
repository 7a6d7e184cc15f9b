package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// Concurrent calls share pipelines but each gets its own exact decision:
// 400 calls from 40 goroutines, over 8 subjects with a burst of 30 and no
// refill to speak of, admit exactly 30 per subject, each call runs its own
// script, and the pipelines are fewer than the calls.
func TestConcurrentCallsArePipelinedAndDecideExactly(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		trips := &testenv.RoundTrips{}
		rdb.AddHook(trips)
		l := ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second})
		prefix := testenv.Unique("batch")
		limit := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 30}
		var (
			wg      sync.WaitGroup
			allowed [8]atomic.Int64
			failed  atomic.Int64
		)
		start := make(chan struct{})
		for g := range 40 {
			wg.Go(func() {
				<-start
				for i := range 10 {
					s := (g + i) % 8
					d, err := l.Allow(context.Background(), ratelimit.Request{Subject: prefix + string(rune('a'+s)), Limits: []ratelimit.Limit{limit}})
					switch {
					case err != nil || d.Source != ratelimit.SourceRedis && d.Source != ratelimit.SourceCache:
						failed.Add(1)
					case d.Allowed:
						allowed[s].Add(1)
					}
				}
			})
		}
		before, scripts := trips.Count(), trips.Scripts()
		close(start)
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d calls got no decision from Redis", f)
		}
		for s := range allowed {
			if n := allowed[s].Load(); n != 30 {
				t.Errorf("subject %d: %d admitted, want exactly the burst of 30", s, n)
			}
		}
		ran, pipelines := trips.Scripts()-scripts, trips.Count()-before
		t.Logf("%d scripts in %d round trips", ran, pipelines)
		if ran > 400 || pipelines >= ran {
			t.Errorf("%d scripts in %d round trips: want at most one script per call, in fewer round trips", ran, pipelines)
		}
	})
}

// A Redis that lost its scripts (restart, failover, SCRIPT FLUSH) gets the
// script again, and a batch of calls still gets its decisions.
func TestPipelinedCallsSurviveAScriptFlush(t *testing.T) {
	rdb := testenv.Redis(t)
	l := ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second})
	req := ratelimit.Request{Subject: testenv.Unique("flush"), Limits: []ratelimit.Limit{{Name: "plan", Rate: 1000, Period: time.Minute, Burst: 1000}}}
	allow(t, l, req)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 20 {
		wg.Go(func() {
			if d, err := l.Allow(context.Background(), req); err != nil || !d.Allowed || d.Source != ratelimit.SourceRedis {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of 20 calls after SCRIPT FLUSH were not admitted by Redis", n)
	}
}
