package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
)

// BreakerState is the state of the circuit breaker in front of Redis.
type BreakerState int32

const (
	BreakerClosed   BreakerState = iota // calls go to Redis
	BreakerOpen                         // calls do not go to Redis
	BreakerHalfOpen                     // one probe is on its way to Redis
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// errOpen stands for the Redis call that the open breaker did not make.
var errOpen = errors.New("circuit breaker open after consecutive failures")

// breaker opens after threshold consecutive failures, so that an outage
// costs a request nothing; after cooldown it lets one probe through, whose
// success closes it.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
	downAt   time.Time // when the current outage began
	// answering: the last failure was Redis's own error reply (OOM when it
	// is full under noeviction), not a lost connection or a timeout: Redis
	// is there and serves reads.
	answering bool
}

// acquire reports whether a call may go to Redis now.
func (b *breaker) acquire(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerOpen:
		if now.Sub(b.openedAt) >= b.cooldown {
			b.state = BreakerHalfOpen
			return true
		}
	}
	return false
}

// succeed records an answer; it returns how long Redis was down if this
// answer ends an outage.
func (b *breaker) succeed(now time.Time) (down time.Duration, recovered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.answering = 0, false
	if b.state == BreakerClosed {
		return 0, false
	}
	b.state = BreakerClosed
	return now.Sub(b.downAt), true
}

// fail records a failed call, answered (an error reply of Redis's own) or
// not; it reports whether the breaker opened from closed.
func (b *breaker) fail(now time.Time, answered bool) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.answering = answered
	switch {
	case b.state == BreakerHalfOpen:
		b.state, b.openedAt = BreakerOpen, now
	case b.state == BreakerClosed && b.failures >= b.threshold:
		b.state, b.openedAt, b.downAt = BreakerOpen, now, now
		return true
	}
	return false
}

// abandon records a call whose caller gave up: it says nothing about Redis,
// but a probe must be made again.
func (b *breaker) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerHalfOpen {
		b.state = BreakerOpen // openedAt unchanged: the next call probes
	}
}

// readable reports whether a read may go to Redis now: while calls go, and
// while the breaker is open because Redis refused writes with an answer of
// its own. Reads never probe: only a write closes the breaker.
func (b *breaker) readable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == BreakerClosed || b.answering
}

// lost records a read that failed while the breaker was open: Redis no
// longer answers, so reads stop too.
func (b *breaker) lost(answered bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answering = b.answering && answered
}

// answered reports whether err is an error reply of Redis's own: Redis is
// reachable and answering.
func answered(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func (b *breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// read runs f, which only reads, against Redis under the Limiter's
// deadline, when the breaker lets reads through (readable): a Redis that is
// full still serves them. Under a closed breaker it counts like any call.
// It returns when the deadline passes even if f has not (a client without
// ContextTimeoutEnabled keeps reading until its own ReadTimeout).
func read[T any](l *Limiter, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if !l.breaker.readable() {
		return zero, errOpen
	}
	if l.breaker.State() == BreakerClosed {
		return callAsync(l, ctx, asyncOf(f))
	}
	l.stats.redisCalls.Add(1)
	r := await(ctx, asyncOf(f)(ctx, time.Now().Add(l.opts.Timeout)), l.opts.Timeout)
	switch {
	case r.err == nil:
		return r.v, nil
	case ctx.Err() != nil:
		return zero, r.err
	}
	l.stats.redisErrors.Add(1)
	l.breaker.lost(answered(r.err))
	return zero, fmt.Errorf("redis: %w", r.err)
}

// await waits for done, at most timeout and while ctx lasts.
func await[T any](ctx context.Context, done <-chan result[T], timeout time.Duration) result[T] {
	// A timer from the pool: since Go 1.23 a stopped timer sends nothing
	// stale, so it is reset and used again, not made (two allocations) on
	// every call.
	timer, _ := awaitTimers.Get().(*time.Timer)
	if timer == nil {
		timer = time.NewTimer(timeout)
	} else {
		timer.Reset(timeout)
	}
	defer func() {
		timer.Stop()
		awaitTimers.Put(timer)
	}()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		return result[T]{err: fmt.Errorf("no answer from redis within %v: %w", timeout, ctx.Err())}
	case <-timer.C:
		return result[T]{err: fmt.Errorf("no answer from redis within %v: %w", timeout, context.DeadlineExceeded)}
	}
}

// awaitTimers are await's stopped timers.
var awaitTimers sync.Pool

// asyncOf runs f on a goroutine of its own, under deadline.
func asyncOf[T any](f func(context.Context) (T, error)) func(ctx context.Context, deadline time.Time) <-chan result[T] {
	return func(ctx context.Context, deadline time.Time) <-chan result[T] {
		done := make(chan result[T], 1)
		go func() {
			ctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			v, err := f(ctx)
			done <- result[T]{v, err}
		}()
		return done
	}
}

type result[T any] struct {
	v   T
	err error
}

// callAsync runs work that answers on a channel (the batcher's) under the
// breaker and the Limiter's deadline.
// start gets the caller's context and the Limiter's deadline, separately:
// a context of its own per call would cost the hot path a timer, a
// context and a registration with the caller's.
func callAsync[T any](l *Limiter, ctx context.Context, start func(ctx context.Context, deadline time.Time) <-chan result[T]) (T, error) {
	var zero T
	if !l.breaker.acquire(l.opts.Now()) {
		return zero, errOpen
	}
	l.stats.redisCalls.Add(1)
	r := await(ctx, start(ctx, time.Now().Add(l.opts.Timeout)), l.opts.Timeout)
	now := l.opts.Now()
	switch {
	case r.err == nil:
		if down, ok := l.breaker.succeed(now); ok {
			l.opts.Logger.Info("ratelimit: redis answers again; circuit breaker closed", "down_for", down.Round(time.Millisecond))
		}
		return r.v, nil
	case ctx.Err() != nil:
		l.breaker.abandon()
		return zero, r.err
	}
	l.stats.redisErrors.Add(1)
	if l.breaker.fail(now, answered(r.err)) {
		l.stats.breakerOpens.Add(1)
		l.opts.Logger.Warn("ratelimit: redis unavailable; circuit breaker open",
			"err", r.err, "on_redis_failure", l.failureMode(), "cooldown", l.opts.Cooldown)
		l.logMu.Lock()
		l.lastLog, l.suppressed = now, 0
		l.logMu.Unlock()
	}
	return zero, fmt.Errorf("redis: %w", r.err)
}

// logTrouble logs a request decided without Redis at most once per
// LogInterval, with the number of such requests since the last line.
func (l *Limiter) logTrouble(now time.Time, err error) {
	l.logMu.Lock()
	l.suppressed++
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < l.opts.LogInterval {
		l.logMu.Unlock()
		return
	}
	n := l.suppressed
	l.lastLog, l.suppressed = now, 0
	l.logMu.Unlock()
	l.opts.Logger.Warn("ratelimit: deciding without redis",
		"err", err, "on_redis_failure", l.failureMode(), "requests", n, "breaker", l.breaker.State().String())
}

// Stats are counts since New and the breaker's state, for metrics.
type Stats struct {
	Breaker BreakerState
	// FailOpen is true while the breaker is not closed under FailOpen:
	// requests are decided by this replica's local limiters.
	FailOpen bool

	RedisCalls   uint64 // calls made to Redis (not those the breaker stopped)
	RedisErrors  uint64 // calls that failed or passed the deadline
	BreakerOpens uint64 // times the breaker opened

	// Decisions by outcome and source.
	AllowedRedis, RefusedRedis       uint64
	RefusedCache                     uint64
	AllowedFailOpen, RefusedFailOpen uint64
	Unavailable                      uint64 // ErrUnavailable under FailClosed
}

// Stats returns the current counts.
func (l *Limiter) Stats() Stats {
	s := l.breaker.State()
	return Stats{
		Breaker:         s,
		FailOpen:        s != BreakerClosed && l.opts.OnRedisFailure != config.FailClosed,
		RedisCalls:      l.stats.redisCalls.Load(),
		RedisErrors:     l.stats.redisErrors.Load(),
		BreakerOpens:    l.stats.breakerOpens.Load(),
		AllowedRedis:    l.stats.allowedRedis.Load(),
		RefusedRedis:    l.stats.refusedRedis.Load(),
		RefusedCache:    l.stats.refusedCache.Load(),
		AllowedFailOpen: l.stats.allowedFailOpen.Load(),
		RefusedFailOpen: l.stats.refusedFailOpen.Load(),
		Unavailable:     l.stats.unavailable.Load(),
	}
}

// failureMode names the mode in force (fail_open unless fail_closed).
func (l *Limiter) failureMode() config.FailureMode {
	if l.opts.OnRedisFailure == config.FailClosed {
		return config.FailClosed
	}
	return config.FailOpen
}
