package quota

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
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

// renewScript moves the expiry of a subject's leases one period ahead of
// now. A lease that expired meanwhile (Redis was out of reach longer than a
// period) is put back: its stream is still open, so it still counts.
//
//	KEYS[1] q:{tag}:streams
//	ARGV[1] lease period, ms
//	ARGV[2…] lease ids (at most maxRenewIDs)
//	returns how many of them had expired (or were gone) and were put back
var renewScript = redis.NewScript(luaNow + `
local period = tonumber(ARGV[1])
local members, lost = {}, 0
for i = 2, #ARGV do
  local expiry = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if not expiry or tonumber(expiry) <= now then
    lost = lost + 1
  end
  members[#members + 1] = now + period
  members[#members + 1] = ARGV[i]
end
redis.call('ZADD', KEYS[1], unpack(members))
if redis.call('PTTL', KEYS[1]) < period then
  redis.call('PEXPIRE', KEYS[1], period)
end
return lost
`)

// Bounds of one renewal round: ids per script (Lua's unpack takes a few
// thousand values at most) and leases per pipeline. A pipeline's answers
// must all be read within one round trip's socket deadline (redis.timeout,
// 50 ms by default): a pipeline of 10,000 leases missed it on a loaded
// machine and failed whole, every round. A thousand take Redis about a
// millisecond.
const (
	maxRenewIDs          = 500
	maxRenewsPerPipeline = 1000
)

// RenewalObserver is told the outcome of each renewal round: how many
// leases were renewed, lost (had expired before renewal, put back and
// counted again) and failed (Redis did not answer; their streams stay
// open). Over a while, renewed+lost+failed is the open leases times the
// rounds: a renewal missed would show as fewer. It must be safe for
// concurrent use.
type RenewalObserver interface {
	LeaseRenewals(renewed, lost, failed int)
}

type nopRenewalObserver struct{}

func (nopRenewalObserver) LeaseRenewals(int, int, int) {}

// Streams counts each subject's open streams in Redis. Safe for concurrent
// use.
//
// One renewer per Streams renews every open lease each third of the lease
// period, in pipelines of one script per subject, a thousand leases each (a
// go-redis ClusterClient sends each node its part in parallel): Redis work
// grows with open streams divided by the period, round trips with open
// streams / 1,000 per node and round, and an open stream holds no
// goroutine or timer of its own. The renewer runs only while leases are
// open.
type Streams struct {
	rdb  redis.UniversalClient
	opts settings
	// failing is set while renewals fail, so that an outage is logged once
	// for all leases, not once per stream and tick.
	failing atomic.Bool

	// round serializes renewal rounds, so that a lease is in at most one
	// round at a time (see Lease.inRound).
	round sync.Mutex

	mu     sync.Mutex
	open   map[*Lease]struct{}
	stop   chan struct{} // closed to stop the renewer; nil when none runs
	landed chan struct{} // closed when the round in flight has its answer
}

// NewStreams returns Streams on rdb (a single Redis or a cluster). It uses
// o.KeyPrefix, o.Timeout, o.Logger, o.LeasePeriod and o.Renewals.
func NewStreams(rdb redis.UniversalClient, o Options) *Streams {
	return &Streams{rdb: rdb, opts: newSettings(o), open: make(map[*Lease]struct{})}
}

// Acquire opens a lease for one stream of subject if fewer than limit are
// open (limit ≤ 0: no limit, though the stream still counts). The lease is
// renewed until Release; the caller releases it when the stream ends,
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
	s.mu.Lock()
	s.open[l] = struct{}{}
	if s.stop == nil {
		s.stop = make(chan struct{})
		ticks, stopTicks := s.opts.ticker(s.opts.leasePeriod / 3)
		go s.renewer(s.stop, ticks, stopTicks)
	}
	s.mu.Unlock()
	return l, nil
}

// Lease is one open stream's slot. Release it when the stream ends.
type Lease struct {
	s       *Streams
	key, id string
	once    sync.Once
	// inRound is set (under s.mu) while a renewal round that holds this
	// lease waits for Redis: Release then waits for the round to land, so
	// that no renewal puts the lease back after its ZREM.
	inRound bool
}

// renewer runs renewal rounds on each tick until stop is closed (the last
// lease was released).
func (s *Streams) renewer(stop <-chan struct{}, ticks <-chan time.Time, stopTicks func()) {
	defer stopTicks()
	for {
		select {
		case <-stop:
			return
		case <-ticks:
		}
		s.renewAll()
	}
}

// renewAll renews every open lease, in one pipeline per thousand leases,
// and reports the round.
func (s *Streams) renewAll() {
	s.round.Lock()
	defer s.round.Unlock()
	s.mu.Lock()
	if len(s.open) == 0 {
		s.mu.Unlock()
		return
	}
	bySubject := make(map[string][]string)
	round := make([]*Lease, 0, len(s.open))
	for l := range s.open {
		l.inRound = true
		bySubject[l.key] = append(bySubject[l.key], l.id)
		round = append(round, l)
	}
	landed := make(chan struct{})
	s.landed = landed
	s.mu.Unlock()

	renewed, lost, failed, err := s.renew(bySubject)

	s.mu.Lock()
	for _, l := range round {
		l.inRound = false
	}
	close(landed)
	s.mu.Unlock()

	switch {
	case failed > 0:
		// The streams stay open: a blip in Redis must not cut users off.
		if s.failing.CompareAndSwap(false, true) {
			s.opts.log.Warn("stream lease renewal failed; streams stay open", "leases", failed, "err", err)
		}
	case s.failing.CompareAndSwap(true, false):
		s.opts.log.Info("stream lease renewal works again")
	}
	if lost > 0 {
		s.opts.log.Warn("stream leases had expired before renewal; counted again", "leases", lost)
	}
	s.opts.renewals.LeaseRenewals(renewed, lost, failed)
}

// renewScripts is one round's scripts: each renews up to maxRenewIDs leases
// of one subject.
type renewScripts struct {
	keys []string
	ids  [][]string
}

// renew runs renewScript for the leases of each subject key and counts the
// leases renewed, lost and failed; err is one of the failures.
func (s *Streams) renew(bySubject map[string][]string) (renewed, lost, failed int, err error) {
	var all renewScripts
	for key, ids := range bySubject {
		for len(ids) > 0 {
			n := min(len(ids), maxRenewIDs)
			all.keys, all.ids = append(all.keys, key), append(all.ids, ids[:n])
			ids = ids[n:]
		}
	}
	period := s.opts.leasePeriod.Milliseconds()
	for start := 0; start < len(all.keys); {
		end, leases := start, 0
		for end < len(all.keys) && (end == start || leases+len(all.ids[end]) <= maxRenewsPerPipeline) {
			leases += len(all.ids[end])
			end++
		}
		part := renewScripts{keys: all.keys[start:end], ids: all.ids[start:end]}
		start = end
		_ = s.opts.callBulk(context.Background(), func(ctx context.Context) error {
			for i, res := range s.runRenewals(ctx, part, period) {
				n, rerr := res.Int64()
				if rerr != nil {
					failed += len(part.ids[i])
					err = rerr
					continue
				}
				lost += int(n)
				renewed += len(part.ids[i]) - int(n)
			}
			return nil
		})
	}
	return renewed, lost, failed, err
}

// runRenewals pipelines the scripts of part. A node that lost the script
// (restarted, failed over, flushed) did not run it: those run again once
// the script is loaded, the others never twice.
func (s *Streams) runRenewals(ctx context.Context, part renewScripts, period int64) []*redis.Cmd {
	cmds := s.pipeline(ctx, part, period)
	var again renewScripts
	var at []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again.keys, again.ids = append(again.keys, part.keys[i]), append(again.ids, part.ids[i])
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return cmds
	}
	if err := renewScript.Load(ctx, s.rdb).Err(); err != nil {
		return cmds
	}
	for j, c := range s.pipeline(ctx, again, period) {
		cmds[at[j]] = c
	}
	return cmds
}

func (s *Streams) pipeline(ctx context.Context, part renewScripts, period int64) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(part.keys))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range part.keys {
			args := make([]any, 0, 1+len(part.ids[i]))
			args = append(args, period)
			for _, id := range part.ids[i] {
				args = append(args, id)
			}
			cmds[i] = renewScript.EvalSha(ctx, p, []string{key}, args...)
		}
		return nil
	})
	return cmds
}

// Release frees the stream's slot and stops its renewal. It may be called
// more than once and from any goroutine; it uses a fresh deadline, so it
// works after the request's context ended. If Redis cannot be reached the
// lease expires by itself within one lease period.
func (l *Lease) Release() {
	l.once.Do(func() {
		s := l.s
		s.mu.Lock()
		delete(s.open, l)
		var landed chan struct{}
		if l.inRound {
			landed = s.landed
		}
		if len(s.open) == 0 && s.stop != nil {
			close(s.stop)
			s.stop = nil
		}
		s.mu.Unlock()
		if landed != nil {
			<-landed // no renewal may put the lease back after ZREM
		}
		err := s.opts.call(context.Background(), func(ctx context.Context) error {
			return s.rdb.ZRem(ctx, l.key, l.id).Err()
		})
		if err != nil && s.failing.CompareAndSwap(false, true) {
			s.opts.log.Warn("stream lease release failed; leases expire by themselves", "err", err)
		}
	})
}
