package ratelimit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

var noon = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// countedClient is a client of addr whose commands are counted.
func countedClient(t *testing.T, addr string, tune ...func(*redis.Options)) (*redis.Client, *counter) {
	t.Helper()
	opts := &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
	for _, f := range tune {
		f(opts)
	}
	rdb := redis.NewClient(opts)
	n := &counter{}
	rdb.AddHook(n)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, n
}

func TestFailOpenAdmitsThisReplicasShareOfEachLimit(t *testing.T) {
	huge := ratelimit.Limit{Name: "plan", Rate: 1_000_000, Period: time.Minute, Burst: 1_000_000}
	cases := []struct {
		name       string
		share      float64
		limits     []ratelimit.Limit
		daily      int
		send       int
		admitted   int
		refused    string
		retryAfter time.Duration
	}{
		// 0.5 of 60/min burst 100: 50 at once, then one every 2s.
		{"HalfOfThePlanBurst", 0.5, []ratelimit.Limit{freePlan}, freeDaily, 60, 50, "plan", 2 * time.Second},
		{"QuarterOfThePlanBurst", 0.25, []ratelimit.Limit{freePlan}, freeDaily, 60, 25, "plan", 4 * time.Second},
		// 0.5 of 10/min burst 10: 5 at once, then one every 12s.
		{"HalfOfAnOperationLimit", 0.5, []ratelimit.Limit{freePlan, createOp}, freeDaily, 10, 5, createOp.Name, 12 * time.Second},
		// 0.5 of a cap of 10 a day, until midnight UTC.
		{"HalfOfTheDailyCap", 0.5, []ratelimit.Limit{huge}, 10, 10, 5, ratelimit.DailyName, 12 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdb, sent := countedClient(t, testkit.DeadAddr(t))
			edge := newClock(noon)
			l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now, LocalShare: c.share, FailureThreshold: 3, Logger: (&logBuffer{}).Logger()})
			req := ratelimit.Request{Subject: testenv.Unique("open"), Limits: c.limits, Daily: c.daily}
			admitted := 0
			var last ratelimit.Decision
			for range c.send {
				last = allow(t, l, req)
				if last.Source != ratelimit.SourceFailOpen {
					t.Fatalf("%+v, want decided by the local limiter", last)
				}
				if last.Allowed {
					admitted++
				}
			}
			if admitted != c.admitted || last.Allowed || last.Refused != c.refused || last.RetryAfter != c.retryAfter {
				t.Fatalf("admitted %d of %d, last %+v; want %d admitted, then refused by %s for %v",
					admitted, c.send, last, c.admitted, c.refused, c.retryAfter)
			}
			s := l.Stats()
			if s.Breaker != ratelimit.BreakerOpen || !s.FailOpen || s.RedisCalls != 3 || s.RedisErrors != 3 || sent.n.Load() != 3 {
				t.Fatalf("stats %+v, commands sent %d: want the breaker open after 3 failed calls and no call since", s, sent.n.Load())
			}
			if s.AllowedFailOpen != uint64(c.admitted) || s.RefusedFailOpen != uint64(c.send-c.admitted) {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestFailClosedReturnsUnavailableWithoutWaitingOnRedis(t *testing.T) {
	rdb, sent := countedClient(t, testkit.DeadAddr(t))
	l := ratelimit.New(rdb, ratelimit.Options{OnRedisFailure: config.FailClosed, FailureThreshold: 2, Logger: (&logBuffer{}).Logger()})
	req := ratelimit.Request{Subject: testenv.Unique("closed"), Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily}
	for i := range 10 {
		if d, err := l.Allow(context.Background(), req); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("request %d: %+v, %v; want ErrUnavailable", i, d, err)
		}
	}
	if _, err := l.Usage(context.Background(), req.Subject); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Usage: %v, want ErrUnavailable", err)
	}
	s := l.Stats()
	if s.Breaker != ratelimit.BreakerOpen || s.FailOpen || s.Unavailable != 10 || s.RedisCalls != 2 || sent.n.Load() != 2 {
		t.Fatalf("stats %+v, commands sent %d: want the breaker open after 2 calls and no call since", s, sent.n.Load())
	}
}

// hungRedis accepts connections and never answers.
func hungRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// The client below ignores context deadlines (go-redis's default): the
// Limiter's own deadline must still end each call.
func TestAHungRedisCountsAsDownAfterTheDeadline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: hungRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	l := ratelimit.New(rdb, ratelimit.Options{Timeout: 20 * time.Millisecond, FailureThreshold: 2, Logger: (&logBuffer{}).Logger()})
	req := ratelimit.Request{Subject: testenv.Unique("hung"), Limits: []ratelimit.Limit{freePlan}}
	for range 5 {
		if d := allow(t, l, req); !d.Allowed || d.Source != ratelimit.SourceFailOpen {
			t.Fatalf("%+v, want admitted by the local limiter", d)
		}
	}
	if s := l.Stats(); s.Breaker != ratelimit.BreakerOpen || s.RedisCalls != 2 || s.RedisErrors != 2 {
		t.Fatalf("stats %+v: want the breaker open after 2 calls past their deadline", s)
	}
}

func TestAfterAnOutageTheProbeClosesTheBreakerAndExactLimitsResume(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(noon) // GCRA's clock, frozen: the numbers below are exact
	rdb, sent := countedClient(t, m.Addr())
	edge := newClock(noon)
	logs := &logBuffer{}
	// The outage below is a stopped server, which fails fast: a generous
	// deadline keeps a loaded machine's healthy Redis from looking like one.
	l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now, FailureThreshold: 3, Cooldown: 5 * time.Second, Logger: logs.Logger(),
		Timeout: 2 * time.Second})
	req := ratelimit.Request{Subject: testenv.Unique("recover"), Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily}
	for range 10 {
		allow(t, l, req)
	}

	m.Close()
	admitted := 0
	for range 60 {
		if d := allow(t, l, req); d.Allowed {
			admitted++
		}
	}
	if admitted != 50 {
		t.Fatalf("during the outage %d of 60 admitted, want 50 (half the burst)", admitted)
	}
	if s := l.Stats(); s.Breaker != ratelimit.BreakerOpen || !s.FailOpen || s.BreakerOpens != 1 {
		t.Fatalf("stats %+v", s)
	}
	if n := strings.Count(logs.String(), "circuit breaker open"); n != 1 {
		t.Fatalf("%d lines about the breaker opening, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "deciding without redis"); n != 1 {
		t.Fatalf("%d lines about deciding without redis for 60 requests, want 1:\n%s", n, logs)
	}

	// Before the cooldown: no call. At the cooldown: one probe, which fails.
	calls := sent.n.Load()
	edge.Add(4 * time.Second)
	if d := allow(t, l, req); d.Source != ratelimit.SourceFailOpen || sent.n.Load() != calls {
		t.Fatalf("before the cooldown: %+v, %d commands sent (want %d)", d, sent.n.Load(), calls)
	}
	edge.Add(time.Second)
	if d := allow(t, l, req); d.Source != ratelimit.SourceFailOpen || sent.n.Load() != calls+1 {
		t.Fatalf("at the cooldown: %+v, %d commands sent (want the probe: %d)", d, sent.n.Load(), calls+1)
	}
	if s := l.Stats(); s.Breaker != ratelimit.BreakerOpen || s.BreakerOpens != 1 {
		t.Fatalf("after a failed probe: %+v", s)
	}
	// A line per interval while Redis stays down.
	edge.Add(30 * time.Second)
	allow(t, l, req)
	if n := strings.Count(logs.String(), "deciding without redis"); n != 2 {
		t.Fatalf("%d lines about deciding without redis after 35s, want 2:\n%s", n, logs)
	}

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	// go-redis, after failed dials, fails new ones at once until its own
	// background redial (every second, real time) reaches the server: wait
	// for the client to see Redis again, so that the probe below tests the
	// breaker, not that redial's timing.
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("the client does not reach the restarted Redis")
		}
		time.Sleep(20 * time.Millisecond)
	}
	edge.Add(5 * time.Second)
	d := allow(t, l, req)
	if !d.Allowed || d.Source != ratelimit.SourceRedis || state(t, d, "plan").Remaining != 89 || d.Today != 11 {
		t.Fatalf("after recovery: %+v, want Redis's exact numbers (89 remaining, 11 today)", d)
	}
	if s := l.Stats(); s.Breaker != ratelimit.BreakerClosed || s.FailOpen {
		t.Fatalf("after recovery: %+v", s)
	}
	if !strings.Contains(logs.String(), "circuit breaker closed") {
		t.Fatalf("no line about the recovery:\n%s", logs)
	}
}

// gate is a hook that holds commands while it is shut.
type gate struct {
	mu      sync.Mutex
	shut    chan struct{}
	entered chan struct{}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.entered = make(chan struct{}), make(chan struct{}, 1)
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.shut)
	g.shut = nil
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.mu.Lock()
		shut, entered := g.shut, g.entered
		g.mu.Unlock()
		if shut != nil {
			entered <- struct{}{}
			<-shut
		}
		return next(ctx, cmd)
	}
}

func TestWhileTheProbeIsOutOtherRequestsDoNotWaitForRedis(t *testing.T) {
	m := miniredis.RunT(t)
	// No retries: the first call fails at once rather than after go-redis's backoff.
	rdb, sent := countedClient(t, m.Addr(), func(o *redis.Options) { o.MaxRetries = -1 })
	g := &gate{}
	rdb.AddHook(g)
	edge := newClock(noon)
	l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now, Timeout: time.Minute, FailureThreshold: 1, Cooldown: time.Second, Logger: (&logBuffer{}).Logger()})
	req := ratelimit.Request{Subject: testenv.Unique("probe"), Limits: []ratelimit.Limit{freePlan}}
	m.Close()
	allow(t, l, req)
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	edge.Add(time.Second)
	g.close()
	probe := make(chan ratelimit.Decision)
	go func() {
		d, _ := l.Allow(context.Background(), req)
		probe <- d
	}()
	<-g.entered
	calls := sent.n.Load()
	if s := l.Stats(); s.Breaker != ratelimit.BreakerHalfOpen {
		t.Fatalf("during the probe: %+v", s)
	}
	for range 3 {
		if d := allow(t, l, req); d.Source != ratelimit.SourceFailOpen {
			t.Fatalf("during the probe: %+v, want decided locally", d)
		}
	}
	if sent.n.Load() != calls {
		t.Fatalf("requests during the probe sent %d commands", sent.n.Load()-calls)
	}
	g.open()
	if d := <-probe; d.Source != ratelimit.SourceRedis {
		t.Fatalf("probe: %+v", d)
	}
	if s := l.Stats(); s.Breaker != ratelimit.BreakerClosed {
		t.Fatalf("after the probe: %+v", s)
	}
}
