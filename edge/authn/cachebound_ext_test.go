package authn_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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
