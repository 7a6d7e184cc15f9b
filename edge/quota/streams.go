package quota

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReasonStreamLimit is the ErrorInfo reason of a refused stream.
const ReasonStreamLimit = "CONCURRENT_STREAMS_EXCEEDED"

// ErrStreamLimit means the subject has its maximum of streams open; the
// caller answers resource_exhausted with reason ReasonStreamLimit.
var ErrStreamLimit = errors.New("quota: too many concurrent streams")

// Lease expiries are Redis's clock (TIME), not the edges': every edge
// judges a lease by the same clock.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// acquireScript drops expired leases, counts the rest, and adds one if there
// are fewer than the maximum.
//
//	KEYS[1] q:{tag}:streams
//	ARGV[1] lease id
//	ARGV[2] maximum of open leases; 0: no maximum
//	ARGV[3] lease period, ms
//	returns {1, open} (added; open counts it) or {0, open} (refused)
var acquireScript = redis.NewScript(luaNow + `
local max, period = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local open = redis.call('ZCARD', KEYS[1])
if max > 0 and open >= max then
  return {0, open}
end
redis.call('ZADD', KEYS[1], now + period, ARGV[1])
if redis.call('PTTL', KEYS[1]) < period then
  redis.call('PEXPIRE', KEYS[1], period)
end
return {1, open + 1}
`)

// renewScript moves a lease's expiry one period ahead of now. A lease that
// expired meanwhile (Redis was out of reach longer than a period) is put
// back: its stream is still open, so it still counts.
//
//	KEYS[1] q:{tag}:streams
//	ARGV[1] lease id
//	ARGV[2] lease period, ms
//	returns 1 if the lease had expired and was put back, else 0
var renewScript = redis.NewScript(luaNow + `
local period = tonumber(ARGV[2])
local added = redis.call('ZADD', KEYS[1], now + period, ARGV[1])
if redis.call('PTTL', KEYS[1]) < period then
  redis.call('PEXPIRE', KEYS[1], period)
end
return added
`)

// Streams counts each subject's open streams in Redis. Safe for concurrent
// use.
type Streams struct {
	rdb  redis.UniversalClient
	opts settings
	// failing is set while renewals fail, so that an outage is logged once
	// for all leases, not once per stream and tick.
	failing atomic.Bool
}

// NewStreams returns Streams on rdb (a single Redis or a cluster). It uses
// o.KeyPrefix, o.Timeout, o.Logger and o.LeasePeriod.
func NewStreams(rdb redis.UniversalClient, o Options) *Streams {
	return &Streams{rdb: rdb, opts: newSettings(o)}
}

// Acquire opens a lease for one stream of subject if fewer than limit are
// open (limit ≤ 0: no limit, though the stream still counts). The lease
// renews itself until Release; the caller releases it when the stream ends,
// whatever the reason.
//
// Errors: ErrStreamLimit (wrapped) when limit streams are open; ErrUnavailable
// (wrapped) when Redis cannot be reached.
func (s *Streams) Acquire(ctx context.Context, subject string, limit int) (*Lease, error) {
	l := &Lease{s: s, key: s.opts.tag(subject) + "streams", id: rand.Text()}
	var res []int64
	err := s.opts.call(ctx, func(ctx context.Context) (err error) {
		res, err = acquireScript.Run(ctx, s.rdb, []string{l.key}, l.id, limit, s.opts.leasePeriod.Milliseconds()).Int64Slice()
		return err
	})
	if err != nil {
		return nil, redisError(ctx, "acquire stream lease", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("quota: acquire stream lease: unexpected reply %v", res)
	}
	if res[0] == 0 {
		return nil, fmt.Errorf("%w: %d of %d open", ErrStreamLimit, res[1], limit)
	}
	ticks, stop := s.opts.ticker(s.opts.leasePeriod / 3)
	var loop context.Context
	loop, l.stop = context.WithCancel(context.Background())
	l.done = make(chan struct{})
	go l.renew(loop, ticks, stop)
	return l, nil
}

// Lease is one open stream's slot. Release it when the stream ends.
type Lease struct {
	s       *Streams
	key, id string
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

func (l *Lease) renew(ctx context.Context, ticks <-chan time.Time, stop func()) {
	defer close(l.done)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		var lost int64
		err := l.s.opts.call(ctx, func(ctx context.Context) (err error) {
			lost, err = renewScript.Run(ctx, l.s.rdb, []string{l.key}, l.id, l.s.opts.leasePeriod.Milliseconds()).Int64()
			return err
		})
		switch {
		case ctx.Err() != nil:
			return // released meanwhile
		case err != nil:
			// The stream stays open: a blip in Redis must not cut users off.
			if l.s.failing.CompareAndSwap(false, true) {
				l.s.opts.log.Warn("stream lease renewal failed; streams stay open", "err", err)
			}
		default:
			if l.s.failing.CompareAndSwap(true, false) {
				l.s.opts.log.Info("stream lease renewal works again")
			}
			if lost == 1 {
				l.s.opts.log.Warn("stream lease had expired before renewal; counted again", "lease", l.id)
			}
		}
	}
}

// Release frees the stream's slot and stops renewal. It may be called more
// than once and from any goroutine; it uses a fresh deadline, so it works
// after the request's context ended. If Redis cannot be reached the lease
// expires by itself within one lease period.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.stop()
		<-l.done // no renewal may put the lease back after ZREM
		err := l.s.opts.call(context.Background(), func(ctx context.Context) error {
			return l.s.rdb.ZRem(ctx, l.key, l.id).Err()
		})
		if err != nil && l.s.failing.CompareAndSwap(false, true) {
			l.s.opts.log.Warn("stream lease release failed; leases expire by themselves", "err", err)
		}
	})
}
