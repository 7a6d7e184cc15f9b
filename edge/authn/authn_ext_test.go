package authn_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/identity"
)

func setup(t testing.TB) (*devissuer.Server, *authn.Authenticator) {
	t.Helper()
	iss, err := devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	v, err := identity.NewVerifier(identity.Config{IssuerURL: iss.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return iss, authn.New(v, 100, 30*time.Second)
}

func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func TestSecondCallWithSameTokenVerifiesNoSignature(t *testing.T) {
	iss, a := setup(t)
	tok, _ := iss.Issuer().TokenFor("alice")
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

func TestCachedTokenIsRefusedOnceExpired(t *testing.T) {
	iss, err := devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	v, err := identity.NewVerifier(identity.Config{IssuerURL: iss.URL(), ClockSkew: 30 * time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a := authn.New(v, 100, 30*time.Second, authn.WithClock(clock))
	tok, _ := iss.Issuer().TokenFor("bob") // lives 10 minutes
	if _, err := a.Authenticate(context.Background(), bearer(tok)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(10*time.Minute + 29*time.Second) // expired, within the skew
	mu.Unlock()
	if _, err := a.Authenticate(context.Background(), bearer(tok)); err != nil {
		t.Fatalf("within skew: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Second) // past the skew
	mu.Unlock()
	_, err = a.Authenticate(context.Background(), bearer(tok))
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
