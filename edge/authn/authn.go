// Package authn authenticates callers at the edge: it verifies the bearer
// token with the identity package and caches the result, keyed by a hash of
// the token and kept until the token expires, so that the steady state
// verifies no signature.
//
// It also keeps failures cheap: a refused token is remembered (bounded) and
// refused again without verification, and a client address that fails too
// often may not have new tokens verified for a while (see
// Options.FailureLimit).
//
// It decides who is calling, not what they may do (see policy).
package authn

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/orgedge/edge/identity"
)

// Verifier verifies one raw token. *identity.Verifier is one.
type Verifier interface {
	Verify(ctx context.Context, raw string) (identity.Principal, error)
}

// Authenticator verifies bearer tokens, with a cache.
type Authenticator struct {
	v Verifier
	// cache and refused are plain LRUs, bounded by their entries alone: a
	// cached token is checked against its expiry when found, and the
	// refusals kept are final (a bad signature, another audience, expiry).
	// (hashicorp's expirable LRU reclaimed expired entries by time, in
	// buckets whose maps keep the room of the most entries they ever held:
	// at 2,000 new tokens a second they grew far past the bound.)
	cache *lru.Cache[uint64, cached[*identity.Principal]]
	skew  time.Duration
	now   func() time.Time
	seed  maphash.Seed // of tokenKey

	refused  *lru.Cache[uint64, cached[*identity.Error]] // nil: off
	failures *failureLimiter                             // nil: off
	shared   *sharedAddresses                            // nil: off
	address  ClientAddress

	hits, verifications, refusedHits, limited atomic.Uint64
	size, refusedSize                         int
	evicted, refusedEvicted                   atomic.Uint64
}

// DefaultCacheSize is how many verified tokens an Authenticator caches
// unless Options.CacheSize says otherwise.
const DefaultCacheSize = 100_000

// Options configure an Authenticator. A zero field takes its default.
type Options struct {
	// CacheSize bounds the verified tokens cached (default DefaultCacheSize).
	CacheSize int
	// ClockSkew is the tolerance on a cached token's expiry, the same the
	// verifier applies (default none).
	ClockSkew time.Duration
	// RefusedCache is how many refused tokens are remembered, so that a
	// refused token sent again is refused without verification (default
	// none). Only final refusals are remembered: not
	// a token whose key is not known yet, nor one refused because the
	// issuer was unreachable.
	RefusedCache int
	// FailureLimit bounds failed authentications per client address (see
	// AuthenticateRequest; default none).
	FailureLimit FailureLimit
	// ClientAddress says how AuthenticateRequest finds the client's address
	// (default: the socket peer).
	ClientAddress ClientAddress
	// SharedAddress, when its Subjects is positive, is told of a client
	// address from which tokens of that many distinct subjects were
	// verified (once per address; see sharedAddresses).
	SharedAddress SharedAddress
}

// SharedAddress is how an Authenticator reports a client address that
// carries many subjects.
type SharedAddress struct {
	Subjects int
	Found    func(addr netip.Addr, subjects int)
}

// FailureLimit is a token bucket per client address: Burst tokens,
// refilled at PerMinute. Either at 0 turns it off.
type FailureLimit struct {
	PerMinute, Burst int
}

// New returns an Authenticator that verifies tokens with v.
func New(v Verifier, o Options) *Authenticator {
	size := o.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	cache, _ := lru.New[uint64, cached[*identity.Principal]](size) // size > 0: no error
	a := &Authenticator{
		v:       v,
		cache:   cache,
		seed:    maphash.MakeSeed(),
		skew:    o.ClockSkew,
		now:     time.Now,
		address: o.ClientAddress,
		size:    size,
	}
	if o.RefusedCache > 0 {
		a.refused, _ = lru.New[uint64, cached[*identity.Error]](o.RefusedCache)
		a.refusedSize = o.RefusedCache
	}
	if fl := o.FailureLimit; fl.PerMinute > 0 && fl.Burst > 0 {
		a.failures = newFailureLimiter(fl.PerMinute, fl.Burst)
	}
	if sa := o.SharedAddress; sa.Subjects > 0 && sa.Found != nil {
		a.shared = newSharedAddresses(sa.Subjects, sa.Found)
	}
	return a
}

// Authenticate returns the principal of the request's bearer token. Errors
// are *identity.Error with a reason. The principal is shared: do not modify it.
// It knows no client address, so no failure limit applies.
func (a *Authenticator) Authenticate(ctx context.Context, h http.Header) (*identity.Principal, error) {
	return a.authenticate(ctx, h, nil)
}

// AuthenticateRequest is Authenticate for a request whose client address
// (see Options.ClientAddress) is bounded by the failure limit: while the address
// has failed too often, a token not verified before is refused with a
// *FailureLimitError, unverified. Cached tokens pass as ever.
func (a *Authenticator) AuthenticateRequest(ctx context.Context, r *http.Request) (*identity.Principal, error) {
	return a.authenticate(ctx, r.Header, r)
}

func (a *Authenticator) authenticate(ctx context.Context, h http.Header, r *http.Request) (*identity.Principal, error) {
	raw, err := identity.BearerToken(h)
	if err != nil {
		return nil, err
	}
	key, tail := a.tokenKey(raw)
	if c, ok := a.cache.Get(key); ok && c.tail == tail {
		if a.now().Before(c.v.Expiry.Add(a.skew)) {
			a.hits.Add(1)
			return c.v, nil
		}
		a.cache.Remove(key)
	}
	return a.verify(ctx, raw, key, tail, r)
}

// cached is what the caches keep of a token besides its key: what it
// verified to (or was refused with), and the last bytes of the token.
type cached[V any] struct {
	v    V
	tail tokenTail
}

// tokenTail is a token's last bytes: for a JWT, the end of its signature.
type tokenTail [16]byte

// tokenKey returns the caches' key for a token, its 64-bit hash under a
// seed drawn at start (hash/maphash), and its tail, which a cached entry
// must match too. A forged token found in the cache would need both: the
// same hash under a seed it cannot learn, and the signature's end of a
// token that verified, whose principal is all the cache would give it. So
// the cache holds no token, and a call costs a hash of its token at memory
// speed instead of a SHA-256 (a tenth of the edge's instructions per call
// before, on 1 KB tokens: docs/benchmarks.md).
func (a *Authenticator) tokenKey(raw string) (uint64, tokenTail) {
	var tail tokenTail
	copy(tail[:], raw[max(0, len(raw)-len(tail)):])
	return maphash.String(a.seed, raw), tail
}

// verify is the cache miss: the failure limit, the refused tokens, then the
// signature.
func (a *Authenticator) verify(ctx context.Context, raw string, key uint64, tail tokenTail, r *http.Request) (*identity.Principal, error) {
	var client netip.Addr
	if r != nil && (a.failures != nil || a.shared != nil) {
		client = a.address.Of(r)
	}
	limit := a.failures != nil && client.IsValid()
	if limit {
		if wait := a.failures.wait(client, a.now()); wait > 0 {
			a.limited.Add(1)
			return nil, &FailureLimitError{RetryAfter: wait}
		}
	}
	if a.refused != nil {
		if c, ok := a.refused.Get(key); ok && c.tail == tail {
			a.refusedHits.Add(1)
			if limit {
				a.failures.fail(client, a.now())
			}
			return nil, c.v
		}
	}
	a.verifications.Add(1)
	p, err := a.v.Verify(ctx, raw)
	if err != nil {
		var ie *identity.Error
		if !errors.As(err, &ie) {
			return nil, err
		}
		if limit && ie.Reason != identity.ReasonIssuerUnavailable {
			a.failures.fail(client, a.now())
		}
		if a.refused != nil && !ie.Retryable && ie.Reason != identity.ReasonIssuerUnavailable {
			if a.refused.Add(key, cached[*identity.Error]{ie, tail}) {
				a.refusedEvicted.Add(1)
			}
		}
		return nil, err
	}
	p.SumSubject()
	if a.shared != nil && client.IsValid() {
		a.shared.saw(client, binary.BigEndian.Uint64(p.SubjectSum[:8]))
	}
	if a.cache.Add(key, cached[*identity.Principal]{&p, tail}) {
		a.evicted.Add(1)
	}
	return &p, nil
}

// Forget drops the cached verification of the request's token, if any (for
// benchmarks and for revocation hooks).
func (a *Authenticator) Forget(h http.Header) {
	if raw, err := identity.BearerToken(h); err == nil {
		key, _ := a.tokenKey(raw)
		a.cache.Remove(key)
	}
}

// Stats returns how many calls the cache answered and how many tokens were
// verified, since start.
func (a *Authenticator) Stats() (hits, verifications uint64) {
	return a.hits.Load(), a.verifications.Load()
}

// FailureStats returns how many calls were refused from the refused-token
// cache, and how many by the failure limit, since start.
func (a *Authenticator) FailureStats() (refusedHits, limited uint64) {
	return a.refusedHits.Load(), a.limited.Load()
}

// CacheStats calls yield for each of the Authenticator's caches: its name,
// the entries it holds, its bound, and the entries it evicted for room since
// start. "token": verified tokens (Options.CacheSize); "refused_token":
// refused tokens (Options.RefusedCache); "failing_address": addresses whose
// failed authentications are counted (Options.FailureLimit, 100,000).
func (a *Authenticator) CacheStats(yield func(name string, entries, bound int, evictions uint64)) {
	yield("token", a.cache.Len(), a.size, a.evicted.Load())
	if a.refused != nil {
		yield("refused_token", a.refused.Len(), a.refusedSize, a.refusedEvicted.Load())
	}
	if a.failures != nil {
		n, ev := a.failures.stats()
		yield("failing_address", n, maxFailingAddresses, ev)
	}
}

// KeyFetches returns how many times the verifier fetched the issuer's keys,
// when it counts them (as *identity.Verifier does); 0 otherwise.
func (a *Authenticator) KeyFetches() uint64 {
	if k, ok := a.v.(interface{ KeyFetches() uint64 }); ok {
		return k.KeyFetches()
	}
	return 0
}
