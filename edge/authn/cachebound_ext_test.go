package authn_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
)

// TestTokenCachesHoldTheirBounds: five verified and five refused tokens
// through caches of three each: three of each kept, two of each evicted.
func TestTokenCachesHoldTheirBounds(t *testing.T) {
	iss, v := startIssuer(t, identity.Config{})
	a := authn.New(v, authn.Options{CacheSize: 3, ClockSkew: 30 * time.Second, RefusedCache: 3, FailureLimit: authn.FailureLimit{PerMinute: 60, Burst: 1000}})
	for i := range 5 {
		good, _ := iss.Issuer.TokenFor(fmt.Sprint("free-user-", i))
		if _, err := a.Authenticate(context.Background(), bearer(good)); err != nil {
			t.Fatal(err)
		}
		claims, _ := iss.Issuer.ClaimsFor(fmt.Sprint("free-user-", i))
		claims["aud"] = []string{"billing"}
		bad, _ := iss.Issuer.Mint(claims)
		if _, err := a.Authenticate(context.Background(), bearer(bad)); err == nil {
			t.Fatal("a token for another audience accepted")
		}
	}
	s := testenv.CacheStats(a)
	for _, name := range []string{"token", "refused_token"} {
		if got, want := s[name], (testenv.CacheStat{Entries: 3, Bound: 3, Evictions: 2}); got != want {
			t.Errorf("%s cache %+v, want %+v", name, got, want)
		}
	}
}

// TestFailingAddressesHoldTheirBound: failed authentications from more
// addresses than are remembered (100,000): the bound holds, the rest are
// counted as evicted.
func TestFailingAddressesHoldTheirBound(t *testing.T) {
	a := authn.New(refuseAll{}, authn.Options{CacheSize: 1, FailureLimit: authn.FailureLimit{PerMinute: 60, Burst: 10}})
	const bound, more = 100_000, 5
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	for i := range bound + more {
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1000", i>>16&255, i>>8&255, i&255)
		r.Header = bearer("garbage")
		if _, err := a.AuthenticateRequest(context.Background(), r); err == nil {
			t.Fatal("garbage accepted")
		}
	}
	if got, want := testenv.CacheStats(a)["failing_address"], (testenv.CacheStat{Entries: bound, Bound: bound, Evictions: more}); got != want {
		t.Errorf("failing addresses %+v, want %+v", got, want)
	}
}

// refuseAll refuses every token as invalid.
type refuseAll struct{}

func (refuseAll) Verify(context.Context, string) (identity.Principal, error) {
	return identity.Principal{}, &identity.Error{Reason: identity.ReasonTokenInvalid, Message: "invalid"}
}

// TestTokenCacheMemoryHoldsItsBoundOverTime: twenty times as many tokens,
// accepted and refused, as a cache of 1,000 entries holds: the memory the
// Authenticator keeps is that of its 1,000 entries, however many tokens
// passed. (The cache was hashicorp's expirable LRU, whose expiry buckets,
// one per hundredth of its TTL, are maps that keep the room of the most
// entries they ever held: at a million subjects, 2,000 new tokens a second,
// they held 88 MB beside the 64 MB of the bounded cache, and would have
// grown to a hundred times the bound. With its TTL at one second, and the
// tokens spread over more than a second, this test failed on it.)
func TestTokenCacheMemoryHoldsItsBoundOverTime(t *testing.T) {
	const size, tokens = 1_000, 20_000
	a := authn.New(acceptAll{}, authn.Options{CacheSize: size, RefusedCache: size})
	before := liveHeap()
	for n := range tokens {
		if _, err := a.Authenticate(context.Background(), bearer(fmt.Sprint("token-", n))); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(context.Background(), bearer(fmt.Sprint("refused-", n))); err == nil {
			t.Fatal("a token acceptAll refuses was accepted")
		}
	}
	grown := int64(liveHeap()) - int64(before)
	s := testenv.CacheStats(a)
	if s["token"].Entries != size || s["refused_token"].Entries != size {
		t.Fatalf("caches %+v, want %d entries each", s, size)
	}
	// A cached principal and its entry take about 400 B here.
	if perEntry := grown / (2 * size); perEntry > 2<<10 {
		t.Errorf("after %d tokens, the caches of 2 × %d entries hold %d B: %d B an entry, want at most 2 KiB", 2*tokens, size, grown, perEntry)
	}
}

// acceptAll accepts every token except those that start with "refused-",
// with a principal of the token's name that lives an hour.
type acceptAll struct{}

func (acceptAll) Verify(_ context.Context, raw string) (identity.Principal, error) {
	if strings.HasPrefix(raw, "refused-") {
		return identity.Principal{}, &identity.Error{Reason: identity.ReasonTokenInvalid, Message: "invalid"}
	}
	return identity.Principal{Subject: raw, Expiry: time.Now().Add(time.Hour)}, nil
}

// liveHeap is the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
