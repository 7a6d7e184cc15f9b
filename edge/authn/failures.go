package authn

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// ReasonTooManyFailures is the ErrorInfo reason of a call refused because its
// client address failed to authenticate too often.
const ReasonTooManyFailures = "TOO_MANY_AUTHENTICATION_FAILURES"

// FailureLimitError refuses a call before its token is verified: the
// client's address has failed to authenticate too often. Answer it as
// resource_exhausted.
type FailureLimitError struct {
	RetryAfter time.Duration // when the address may try a new token again
}

func (e *FailureLimitError) Error() string {
	return fmt.Sprintf("too many failed authentications from this address: retry in %v", e.RetryAfter.Round(time.Second))
}

// maxFailingAddresses bounds the addresses whose failures are remembered;
// the least recently failed are forgotten first.
const maxFailingAddresses = 100_000

// failureLimiter is a token bucket per client address, in memory: each
// failed authentication takes a token, and an address without one may not
// have a new token verified until the bucket refills.
type failureLimiter struct {
	perSecond float64
	burst     float64

	mu      sync.Mutex
	buckets *simplelru.LRU[netip.Addr, *bucket]
	evicted uint64 // addresses forgotten for room
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newFailureLimiter(perMinute, burst int) *failureLimiter {
	lru, _ := simplelru.NewLRU[netip.Addr, *bucket](maxFailingAddresses, nil) // size > 0: no error
	return &failureLimiter{perSecond: float64(perMinute) / 60, burst: float64(burst), buckets: lru}
}

// addressKey groups an IPv6 client by its /64, which one subscriber usually
// holds whole: otherwise one attacker would have 2^64 buckets.
func addressKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// refill brings b to now; the caller holds l.mu.
func (l *failureLimiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = min(l.burst, b.tokens+d*l.perSecond)
	}
	b.last = now
}

// wait returns how long addr must wait before a new token of its may be
// verified: 0 when it may now.
func (l *failureLimiter) wait(addr netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.Peek(addressKey(addr))
	if !ok {
		return 0
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / l.perSecond * float64(time.Second))
}

// stats returns the addresses remembered and those forgotten for room.
func (l *failureLimiter) stats() (int, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buckets.Len(), l.evicted
}

// fail records a failed authentication from addr.
func (l *failureLimiter) fail(addr netip.Addr, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := addressKey(addr)
	b, ok := l.buckets.Get(key)
	if !ok {
		b = &bucket{tokens: l.burst, last: now}
		if l.buckets.Add(key, b) {
			l.evicted++
		}
	}
	l.refill(b, now)
	b.tokens = max(0, b.tokens-1)
}

// AddressLimit is a token bucket per client address, in memory, the same
// as the bound on failed authentications: for other requests that a client
// could send without end and that cost the edge something before any
// token is checked (CORS preflights).
type AddressLimit struct{ l *failureLimiter }

// NewAddressLimit returns buckets of burst tokens, refilled at perMinute.
// perMinute and burst must be positive.
func NewAddressLimit(perMinute, burst int) *AddressLimit {
	return &AddressLimit{newFailureLimiter(perMinute, burst)}
}

// Take takes a token from addr's bucket and returns 0, or, when the bucket
// is empty, takes none and returns how long until it has one.
func (a *AddressLimit) Take(addr netip.Addr) time.Duration {
	now := time.Now()
	if wait := a.l.wait(addr, now); wait > 0 {
		return wait
	}
	a.l.fail(addr, now)
	return 0
}
