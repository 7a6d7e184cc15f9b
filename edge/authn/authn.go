// Package authn authenticates callers at the edge: it verifies the bearer
// token with the identity package and caches the result, keyed by a hash of
// the token and kept until the token expires, so that the steady state
// verifies no signature.
//
// It decides who is calling, not what they may do (see policy).
package authn

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/orgedge/edge/identity"
)

// Verifier verifies one raw token. *identity.Verifier is one.
type Verifier interface {
	Verify(ctx context.Context, raw string) (identity.Principal, error)
}

// maxCacheTTL bounds how long an entry lives in the cache whatever its
// token says; tokens are short-lived (minutes), so this only reclaims memory.
const maxCacheTTL = 15 * time.Minute

// Authenticator verifies bearer tokens, with a cache.
type Authenticator struct {
	v     Verifier
	cache *expirable.LRU[[sha256.Size]byte, *identity.Principal]
	skew  time.Duration
	now   func() time.Time

	hits, verifications atomic.Uint64
}

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithClock sets the clock that decides whether a cached token has expired.
func WithClock(now func() time.Time) Option { return func(a *Authenticator) { a.now = now } }

// New returns an Authenticator caching at most size verified tokens. skew is
// the tolerance on expiry, the same the verifier applies.
func New(v Verifier, size int, skew time.Duration, opts ...Option) *Authenticator {
	a := &Authenticator{
		v:     v,
		cache: expirable.NewLRU[[sha256.Size]byte, *identity.Principal](size, nil, maxCacheTTL),
		skew:  skew,
		now:   time.Now,
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Authenticate returns the principal of the request's bearer token. Errors
// are *identity.Error with a reason. The principal is shared: do not modify it.
func (a *Authenticator) Authenticate(ctx context.Context, h http.Header) (*identity.Principal, error) {
	raw, err := identity.BearerToken(h)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(raw))
	if p, ok := a.cache.Get(key); ok {
		if a.now().Before(p.Expiry.Add(a.skew)) {
			a.hits.Add(1)
			return p, nil
		}
		a.cache.Remove(key)
	}
	a.verifications.Add(1)
	p, err := a.v.Verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	p.SubjectSum = sha256.Sum256([]byte(p.Subject))
	a.cache.Add(key, &p)
	return &p, nil
}

// Forget drops the cached verification of the request's token, if any (for
// benchmarks and for revocation hooks).
func (a *Authenticator) Forget(h http.Header) {
	if raw, err := identity.BearerToken(h); err == nil {
		a.cache.Remove(sha256.Sum256([]byte(raw)))
	}
}

// Stats returns how many calls the cache answered and how many tokens were
// verified, since start.
func (a *Authenticator) Stats() (hits, verifications uint64) {
	return a.hits.Load(), a.verifications.Load()
}
