package quota_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
)

// target is one Redis the suite runs against.
//
// Stream leases expire by Redis's clock (TIME), which tests cannot inject
// into a real server. So time-driven stream tests move Redis's clock on
// miniredis (SetTime: deterministic, with the default 30s lease period) and,
// on the real servers, use a 1s lease period and wait until Redis's own TIME
// has passed the instant they need (a condition, not a fixed sleep).
type target struct {
	rdb  redis.UniversalClient
	mini *miniredis.Miniredis // nil on real servers
	// period is the lease period of time-driven stream tests.
	period time.Duration
}

// eachTarget runs f, in parallel, against miniredis, one real Redis and a
// real Redis Cluster.
func eachTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		f(t, miniTarget(t))
	})
	for name, connect := range testenv.RedisTargets() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, target{rdb: connect(t), period: time.Second})
		})
	}
}

// miniTarget starts a miniredis for this test, its clock stopped.
func miniTarget(t *testing.T) target {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return target{rdb: rdb, mini: m, period: quota.DefaultLeasePeriod}
}

// now returns Redis's clock. The nodes of the test cluster share one
// machine, hence one clock.
func (tg target) now(t *testing.T) time.Time {
	t.Helper()
	now, err := tg.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("redis TIME: %v", err)
	}
	return now
}

// passTime returns once Redis's clock is past at: it sets miniredis's
// clock, and waits for a real server's.
func (tg target) passTime(t *testing.T, at time.Time) {
	t.Helper()
	if tg.mini != nil {
		tg.mini.SetTime(at.Add(time.Millisecond))
		return
	}
	deadline := time.After(10 * time.Second)
	for {
		now := tg.now(t)
		if now.After(at) {
			return
		}
		select {
		case <-time.After(at.Sub(now) + time.Millisecond):
		case <-deadline:
			t.Fatalf("redis clock stuck at %v, waiting for %v", now, at)
		}
	}
}

// ticker is a lease-renewal ticker that the test drives.
type ticker chan time.Time

// drives makes tk pace s's renewals, and returns s.
func (tk ticker) drives(s *quota.Streams) *quota.Streams {
	s.SetRenewTicker(func(time.Duration) (<-chan time.Time, func()) { return tk, func() {} })
	return s
}

// renew makes the lease renew once and returns when that renewal is over:
// the renewal loop takes a tick only between renewals, so the second send
// completes once the first renewal ended (and starts another, which only
// renews again).
func (tk ticker) renew(t *testing.T) {
	t.Helper()
	for range 2 {
		select {
		case tk <- time.Now():
		case <-time.After(10 * time.Second):
			t.Fatal("the lease does not take renewal ticks")
		}
	}
}

// neverRenew gives s the ticker of an edge that crashed: its leases are
// never renewed (nor released). It returns s.
func neverRenew(s *quota.Streams) *quota.Streams {
	s.SetRenewTicker(func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} })
	return s
}

// clock is an edge clock that only moves when told.
type clock = testenv.Clock

func newClock(t time.Time) *clock { return testenv.NewClock(t) }

// logs collects log lines written from any goroutine.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logs) count(substr string) int { return strings.Count(l.String(), substr) }

// redisDeadline is the Redis deadline of tests that are not about
// deadlines: a loaded CI machine running -race can take longer than the
// production 50ms to answer, even from miniredis.
const redisDeadline = 2 * time.Second

// renewals is a quota.RenewalObserver that keeps each renewal round's
// report for the test; it never blocks the renewer.
type renewals struct {
	mu   sync.Mutex
	got  []round
	read int
	more chan struct{}
}

// round is one renewal round's report.
type round struct{ renewed, lost, failed int }

func newRenewals() *renewals { return &renewals{more: make(chan struct{}, 1)} }

func (r *renewals) LeaseRenewals(renewed, lost, failed int) {
	r.mu.Lock()
	r.got = append(r.got, round{renewed, lost, failed})
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// next returns the next round's report.
func (r *renewals) next(t *testing.T) round {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if rds := r.unread(1); len(rds) == 1 {
			return rds[0]
		}
		select {
		case <-r.more:
		case <-timeout:
			t.Fatal("no renewal round reported")
		}
	}
}

// unread returns up to n reports not read yet (n < 0: all of them).
func (r *renewals) unread(n int) []round {
	r.mu.Lock()
	defer r.mu.Unlock()
	rds := r.got[r.read:]
	if n >= 0 && len(rds) > n {
		rds = rds[:n]
	}
	r.read += len(rds)
	return rds
}

// round makes the leases renew once and returns the round's report.
func (tk ticker) round(t *testing.T, r *renewals) round {
	t.Helper()
	select {
	case tk <- time.Now():
	case <-time.After(10 * time.Second):
		t.Fatal("the renewer does not take ticks")
	}
	return r.next(t)
}
