package identity_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/identity"
)

func start(t *testing.T) *devissuer.Server {
	t.Helper()
	s, err := devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func verifier(t *testing.T, cfg identity.Config) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	var ie *identity.Error
	if !errors.As(err, &ie) || ie.Reason != reason {
		t.Fatalf("got %v, want reason %s", err, reason)
	}
}

func TestServiceAccountAndPersonClaimsBecomePrincipals(t *testing.T) {
	iss := start(t)
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api"})
	hc := &http.Client{Timeout: 5 * time.Second}

	tok, err := devissuer.ClientCredentials(ctx(t), hc, iss.URL(), "svc-env-manager", "dev-secret")
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !p.ServiceAccount() || !p.HasRole("svc-env-manager") || p.HasRole("svc-admin") || p.ClientID != "svc-env-manager" || p.Email != "" {
		t.Fatalf("service account principal %+v", p)
	}

	tok, err = devissuer.Password(ctx(t), hc, iss.URL(), "cli", "bob", "bob")
	if err != nil {
		t.Fatal(err)
	}
	p, err = v.Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.ServiceAccount() || p.Plan != "pro" || p.Email != "bob@example.com" || p.Username != "bob" || p.Subject == "" {
		t.Fatalf("person principal %+v", p)
	}
	if d := time.Until(p.Expiry); d < 9*time.Minute || d > 10*time.Minute {
		t.Fatalf("expiry in %v, want about 10 minutes", d)
	}
}

func TestRoleClaimsAreConfigurableAndUnverifiedEmailIsIgnored(t *testing.T) {
	iss := start(t)
	claims, err := iss.Issuer().ClaimsFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	claims["email_verified"] = false
	claims["resource_access"] = map[string]any{"cli": map[string]any{"roles": []any{"svc-viewer"}}, "other": map[string]any{"roles": []any{"svc-admin"}}}
	claims["groups"] = "svc-admin team-a"
	tok, err := iss.Issuer().Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	p, err := verifier(t, identity.Config{IssuerURL: iss.URL()}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Email != "" {
		t.Fatalf("unverified email %q was taken", p.Email)
	}
	// Default paths: realm roles, and the roles of the client the token is for (azp=cli), not another client's.
	if !slices.Equal(p.Roles, []string{"svc-viewer"}) {
		t.Fatalf("roles %v, want [svc-viewer]", p.Roles)
	}
	p, err = verifier(t, identity.Config{IssuerURL: iss.URL(), RoleClaims: []string{"groups"}}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []string{"svc-admin", "team-a"}) {
		t.Fatalf("roles %v from a space-separated claim", p.Roles)
	}
}

func TestBadTokensAreRefusedWithAReason(t *testing.T) {
	iss := start(t)
	other := start(t)
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", ClockSkew: 10 * time.Second})
	mint := func(change func(map[string]any)) string {
		c, err := iss.Issuer().ClaimsFor("alice")
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		tok, err := iss.Issuer().Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	foreign, err := other.Issuer().TokenFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := iss.Issuer().ClaimsFor("alice")
	symmetric, err := jwt.Signed(hmac).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cases := []struct {
		name, token, reason string
	}{
		{"ExpiredBeyondSkew", mint(func(c map[string]any) { c["exp"] = now.Add(-11 * time.Second).Unix() }), identity.ReasonTokenExpired},
		{"WrongAudience", mint(func(c map[string]any) { c["aud"] = []string{"billing"}; c["azp"] = "billing" }), identity.ReasonTokenInvalid},
		{"WrongIssuer", mint(func(c map[string]any) { c["iss"] = "http://evil.example/realms/dev" }), identity.ReasonTokenInvalid},
		{"NoSubject", mint(func(c map[string]any) { delete(c, "sub") }), identity.ReasonTokenInvalid},
		{"SignedByAnotherIssuer", foreign, identity.ReasonTokenInvalid},
		{"SymmetricAlgorithm", symmetric, identity.ReasonTokenInvalid},
		{"Garbage", "a.b.c", identity.ReasonTokenInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.Verify(ctx(t), c.token)
			wantReason(t, err, c.reason)
		})
	}
	t.Run("ExpiredWithinSkewIsAccepted", func(t *testing.T) {
		tok := mint(func(c map[string]any) { c["exp"] = now.Add(-5 * time.Second).Unix() })
		if _, err := v.Verify(ctx(t), tok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AudienceMatchedByAzp", func(t *testing.T) {
		tok := mint(func(c map[string]any) { c["aud"] = []string{"account"}; c["azp"] = "api" })
		if _, err := v.Verify(ctx(t), tok); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRotatedKeyIsAcceptedWithoutRestart(t *testing.T) {
	iss := start(t)
	v := verifier(t, identity.Config{IssuerURL: iss.URL()})
	before, _ := iss.Issuer().TokenFor("alice")
	if _, err := v.Verify(ctx(t), before); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Issuer().RotateKey(); err != nil {
		t.Fatal(err)
	}
	after, _ := iss.Issuer().TokenFor("alice")
	if _, err := v.Verify(ctx(t), after); err != nil {
		t.Fatalf("token signed with the new key: %v", err)
	}
}

func TestBearerHeaderIsParsedStrictly(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		reason string
	}{
		{"Missing", nil, identity.ReasonTokenMissing},
		{"Empty", []string{"Bearer "}, identity.ReasonTokenMissing},
		{"OtherScheme", []string{"Basic YTpi"}, identity.ReasonTokenInvalid},
		{"Twice", []string{"Bearer a", "Bearer b"}, identity.ReasonTokenInvalid},
		{"TooLong", []string{"Bearer " + string(make([]byte, identity.MaxTokenBytes))}, identity.ReasonTokenInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := identity.BearerToken(http.Header{"Authorization": c.values})
			wantReason(t, err, c.reason)
		})
	}
	tok, err := identity.BearerToken(http.Header{"Authorization": {"bearer abc.def.ghi"}})
	if err != nil || tok != "abc.def.ghi" {
		t.Fatalf("got %q, %v", tok, err)
	}
}

func TestIssuerDownIsUnavailableNotUnauthenticated(t *testing.T) {
	iss := start(t)
	url := iss.URL()
	tok, _ := iss.Issuer().TokenFor("alice")
	if err := iss.Close(); err != nil {
		t.Fatal(err)
	}
	v := verifier(t, identity.Config{IssuerURL: url, HTTPTimeout: time.Second})
	_, err := v.Verify(ctx(t), tok)
	wantReason(t, err, identity.ReasonIssuerUnavailable)
	if v.Ready(ctx(t)) == nil {
		t.Fatal("Ready with the issuer down")
	}
}
