package authn_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
)

// startIssuer starts a development issuer and a verifier of its tokens
// configured by cfg, whose issuer and audience it fills in.
func startIssuer(t testing.TB, cfg identity.Config) (*devissuer.Server, *identity.Verifier) {
	t.Helper()
	iss, err := devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	cfg.IssuerURL, cfg.Audience = iss.URL(), devissuer.DefaultAudience
	v, err := identity.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return iss, v
}

func setup(t testing.TB) (*devissuer.Server, *authn.Authenticator) {
	t.Helper()
	iss, v := startIssuer(t, identity.Config{})
	return iss, authn.New(v, authn.Options{CacheSize: 100, ClockSkew: 30 * time.Second})
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func TestSecondCallWithSameTokenVerifiesNoSignature(t *testing.T) {
	iss, a := setup(t)
	tok, _ := iss.Issuer.TokenFor("alice")
	for range 5 {
		p, err := a.Authenticate(context.Background(), bearer(tok))
		if err != nil || p.Username != "alice" {
			t.Fatalf("got %+v, %v", p, err)
		}
	}
	if hits, verifications := a.Stats(); hits != 4 || verifications != 1 {
		t.Fatalf("hits %d verifications %d, want 4 and 1", hits, verifications)
	}
}

// TestForgedTokenIsNotAnsweredFromTheCache: once alice's token is cached,
// tokens that keep its signature (so its last bytes too) but carry another
// payload are verified, and refused, never taken for alice's.
func TestForgedTokenIsNotAnsweredFromTheCache(t *testing.T) {
	iss, a := setup(t)
	alice, _ := iss.Issuer.TokenFor("alice")
	bob, _ := iss.Issuer.TokenFor("bob")
	if _, err := a.Authenticate(context.Background(), bearer(alice)); err != nil {
		t.Fatal(err)
	}
	ap, bp := strings.Split(alice, "."), strings.Split(bob, ".")
	flipped := []byte(ap[1])
	flipped[len(flipped)/2] ^= 1
	for name, forged := range map[string]string{
		"bob's payload, alice's signature":   ap[0] + "." + bp[1] + "." + ap[2],
		"alice's payload altered by one bit": ap[0] + "." + string(flipped) + "." + ap[2],
	} {
		_, before := a.Stats()
		p, err := a.Authenticate(context.Background(), bearer(forged))
		if err == nil {
			t.Errorf("%s: authenticated as %q", name, p.Username)
		}
		if _, after := a.Stats(); after != before+1 {
			t.Errorf("%s: %d verifications, want 1: the cache answered it", name, after-before)
		}
	}
}

func TestCachedTokenIsRefusedOnceExpired(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	iss, v := startIssuer(t, identity.Config{ClockSkew: 30 * time.Second, Now: clock})
	a := authn.New(v, authn.Options{CacheSize: 100, ClockSkew: 30 * time.Second})
	a.SetClock(clock)
	// The issuer stamps exp from its own clock, when it mints the token: the
	// test's clock moves from that exp, not from when the test began (under
	// load, starting the issuer can take longer than the skew's margin).
	claims, _ := iss.Issuer.ClaimsFor("bob") // lives 10 minutes
	tok, _ := iss.Issuer.Mint(claims)
	exp := time.Unix(claims["exp"].(int64), 0)
	if _, err := a.Authenticate(context.Background(), bearer(tok)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = exp.Add(29 * time.Second) // expired, within the skew
	mu.Unlock()
	if _, err := a.Authenticate(context.Background(), bearer(tok)); err != nil {
		t.Fatalf("within skew: %v", err)
	}
	mu.Lock()
	now = exp.Add(31 * time.Second) // past the skew
	mu.Unlock()
	_, err := a.Authenticate(context.Background(), bearer(tok))
	var ie *identity.Error
	if !errors.As(err, &ie) || ie.Reason != identity.ReasonTokenExpired {
		t.Fatalf("got %v, want TOKEN_EXPIRED", err)
	}
}

func TestFailuresAreNotCached(t *testing.T) {
	_, a := setup(t)
	for range 2 {
		if _, err := a.Authenticate(context.Background(), bearer("x.y.z")); err == nil {
			t.Fatal("garbage accepted")
		}
	}
	if _, verifications := a.Stats(); verifications != 2 {
		t.Fatalf("verifications %d, want 2", verifications)
	}
}

func TestRefusedTokenIsRememberedButARetryableRefusalIsNot(t *testing.T) {
	iss, v := startIssuer(t, identity.Config{KeyRefetchInterval: time.Hour})
	a := authn.New(v, authn.Options{CacheSize: 100, ClockSkew: 30 * time.Second, RefusedCache: 10})
	claims, _ := iss.Issuer.ClaimsFor("alice")
	claims["aud"] = []string{"billing"}
	wrongAudience, _ := iss.Issuer.Mint(claims)
	for range 3 {
		if _, err := a.Authenticate(context.Background(), bearer(wrongAudience)); err == nil {
			t.Fatal("token for another audience accepted")
		}
	}
	if _, v := a.Stats(); v != 1 {
		t.Fatalf("verifications %d for one refused token sent 3 times, want 1", v)
	}
	// A key rotated after the last fetch for an unknown key: refused while
	// the keys may not be fetched again, but not remembered.
	if _, err := iss.Issuer.RotateKey(); err != nil {
		t.Fatal(err)
	}
	first, _ := iss.Issuer.TokenFor("alice")
	if _, err := a.Authenticate(context.Background(), bearer(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Issuer.RotateKey(); err != nil {
		t.Fatal(err)
	}
	newKey, _ := iss.Issuer.TokenFor("alice")
	_, err := a.Authenticate(context.Background(), bearer(newKey))
	if ie := (*identity.Error)(nil); !errors.As(err, &ie) || !ie.Retryable {
		t.Fatalf("got %v, want a retryable refusal", err)
	}
	_, _ = a.Authenticate(context.Background(), bearer(newKey))
	if _, v := a.Stats(); v != 4 {
		t.Fatalf("verifications %d, want 4: a retryable refusal is verified again", v)
	}
}

func TestFailureLimitRefusesNewTokensButNotCachedOnes(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	iss, v := startIssuer(t, identity.Config{Now: clock.Now})
	a := authn.New(v, authn.Options{CacheSize: 100, ClockSkew: 30 * time.Second, FailureLimit: authn.FailureLimit{PerMinute: 60, Burst: 2}})
	a.SetClock(clock.Now)
	request := func(remote, tok string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = remote
		r.Header = bearer(tok)
		return r
	}
	good, _ := iss.Issuer.TokenFor("bob")
	if _, err := a.AuthenticateRequest(context.Background(), request("192.0.2.1:1000", good)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.AuthenticateRequest(context.Background(), request("192.0.2.1:1001", "x.y.z")); err == nil {
			t.Fatal("garbage accepted")
		}
	}
	fresh, _ := iss.Issuer.TokenFor("carol")
	_, err := a.AuthenticateRequest(context.Background(), request("192.0.2.1:1002", fresh))
	fl, ok := errors.AsType[*authn.FailureLimitError](err)
	if !ok || fl.RetryAfter <= 0 || fl.RetryAfter > time.Second {
		t.Fatalf("got %v, want a failure limit of at most 1s", err)
	}
	if _, err := a.AuthenticateRequest(context.Background(), request("192.0.2.1:1003", good)); err != nil {
		t.Fatalf("cached token: %v", err)
	}
	if _, err := a.AuthenticateRequest(context.Background(), request("192.0.2.2:1000", fresh)); err != nil {
		t.Fatalf("another address: %v", err)
	}
	// IPv6 clients are bounded by /64.
	for range 2 {
		_, _ = a.AuthenticateRequest(context.Background(), request("[2001:db8::1]:1", "x.y.z"))
	}
	if _, err := a.AuthenticateRequest(context.Background(), request("[2001:db8::ffff]:1", "a.b.c")); !errors.As(err, &fl) {
		t.Fatalf("same /64: %v", err)
	}
	clock.Add(time.Second)
	_, err = a.AuthenticateRequest(context.Background(), request("192.0.2.1:1004", "x.y.z"))
	if ie := (*identity.Error)(nil); !errors.As(err, &ie) {
		t.Fatalf("after a second: %v, want the token verified (and refused)", err)
	}
}

func TestClientAddressTrustsTheHeaderOfTrustedProxiesOnly(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	const none = "invalid IP" // a trusted proxy's own call: no client address to bound
	cases := []struct {
		header, remote, value, want string
	}{
		{"X-Forwarded-For", "10.1.2.3:5000", "203.0.113.9", "203.0.113.9"},
		{"X-Forwarded-For", "10.1.2.3:5000", "198.51.100.1, 203.0.113.9", "203.0.113.9"},
		// The client's own entries (left) are skipped past the first untrusted hop.
		{"X-Forwarded-For", "10.1.2.3:5000", "6.6.6.6, 203.0.113.9, 10.9.9.9", "203.0.113.9"},
		{"X-Forwarded-For", "10.1.2.3:5000", "10.9.9.9, 10.8.8.8", none},
		{"X-Forwarded-For", "10.1.2.3:5000", "garbage", none},
		{"X-Forwarded-For", "10.1.2.3:5000", "", none},
		{"X-Forwarded-For", "10.1.2.3:5000", "203.0.113.9:4711", "203.0.113.9"},
		{"X-Forwarded-For", "192.0.2.1:5000", "203.0.113.9", "192.0.2.1"},
		{"X-Forwarded-For", "[::ffff:10.1.2.3]:5000", "203.0.113.9", "203.0.113.9"},
		{"Forwarded", "10.1.2.3:5000", `for=6.6.6.6, for="[2001:db8::1]:4711";proto=https`, "2001:db8::1"},
		{"Forwarded", "10.1.2.3:5000", `for=203.0.113.9;by=10.1.2.3, for=10.2.2.2`, "203.0.113.9"},
		{"Forwarded", "10.1.2.3:5000", `for=unknown`, none},
		{"X-Real-IP", "10.1.2.3:5000", "203.0.113.9", "203.0.113.9"},
	}
	for _, tc := range cases {
		c := authn.ClientAddress{Header: tc.header, TrustedProxies: trusted}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		if tc.value != "" {
			r.Header.Set(tc.header, tc.value)
		}
		if got := c.Of(r); got.String() != tc.want {
			t.Errorf("peer %s %s %q: %s, want %s", tc.remote, tc.header, tc.value, got, tc.want)
		}
	}
	// Without a header configured, a trusted proxy's calls are its own.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	if got := (authn.ClientAddress{TrustedProxies: trusted}).Of(r); got.IsValid() {
		t.Errorf("a trusted peer without a header: %s, want no client address", got)
	}
}
