package identity_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
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

	tok, err := testkit.ClientCredentials(ctx(t), hc, iss.URL(), "svc-env-manager", "dev-secret")
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
	claims, err := iss.Issuer.ClaimsFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	claims["email_verified"] = false
	claims["groups"] = "svc-admin team-a"
	tok, err := iss.Issuer.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	p, err := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api"}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Email != "" {
		t.Fatalf("unverified email %q was taken", p.Email)
	}
	p, err = verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", RoleClaims: []string{"groups"}}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []string{"svc-admin", "team-a"}) {
		t.Fatalf("roles %v from a space-separated claim", p.Roles)
	}
}

// The owner of any client of the realm can give that client a role named
// svc-admin; by default only realm roles and the API's own client roles count.
func TestClientRolesCountOnlyFromTheAPIsOwnClient(t *testing.T) {
	iss := start(t)
	claims, err := iss.Issuer.ClaimsFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	claims["azp"] = "team-tool" // a client someone else administers
	claims["realm_access"] = map[string]any{"roles": []any{"svc-viewer"}}
	claims["resource_access"] = map[string]any{
		"team-tool": map[string]any{"roles": []any{"svc-admin"}},
		"api":       map[string]any{"roles": []any{"svc-env-manager"}},
	}
	tok, err := iss.Issuer.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	p, err := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api"}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []string{"svc-env-manager", "svc-viewer"}) {
		t.Fatalf("roles %v, want [svc-env-manager svc-viewer]", p.Roles)
	}
	// An operator who wants the token's own client's roles says so.
	p, err = verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", RoleClaims: []string{"resource_access.${azp}.roles"}}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []string{"svc-admin"}) {
		t.Fatalf("roles %v with ${azp}, want [svc-admin]", p.Roles)
	}
	// With any audience accepted there is no API client: realm roles only.
	p, err = verifier(t, identity.Config{IssuerURL: iss.URL(), AllowAnyAudience: true}).Verify(ctx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []string{"svc-viewer"}) {
		t.Fatalf("roles %v without audience, want [svc-viewer]", p.Roles)
	}
}

func TestAudienceIsRequiredUnlessExplicitlyWaived(t *testing.T) {
	if _, err := identity.NewVerifier(identity.Config{IssuerURL: "http://127.0.0.1:1/realms/dev"}); err == nil || !strings.Contains(err.Error(), "audience is required") {
		t.Fatalf("no audience: %v", err)
	}
	if _, err := identity.NewVerifier(identity.Config{IssuerURL: "http://127.0.0.1:1/realms/dev", Audience: "api", AllowAnyAudience: true}); err == nil {
		t.Fatal("audience with AllowAnyAudience accepted")
	}
	iss := start(t)
	c, _ := iss.Issuer.ClaimsFor("alice")
	c["aud"] = []string{"billing"}
	tok, _ := iss.Issuer.Mint(c)
	if _, err := verifier(t, identity.Config{IssuerURL: iss.URL(), AllowAnyAudience: true}).Verify(ctx(t), tok); err != nil {
		t.Fatalf("any audience: %v", err)
	}
	_, err := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api"}).Verify(ctx(t), tok)
	wantReason(t, err, identity.ReasonTokenInvalid)
}

func TestBadTokensAreRefusedWithAReason(t *testing.T) {
	iss := start(t)
	other := start(t)
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", ClockSkew: 10 * time.Second})
	mint := func(change func(map[string]any)) string {
		c, err := iss.Issuer.ClaimsFor("alice")
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		tok, err := iss.Issuer.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	mintTyped := func(typ string) string {
		c, _ := iss.Issuer.ClaimsFor("alice")
		tok, err := iss.Issuer.MintTyped(typ, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	foreign, err := other.Issuer.TokenFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := iss.Issuer.ClaimsFor("alice")
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
		{"IDTokenByClaim", mint(func(c map[string]any) { c["typ"] = "ID" }), identity.ReasonTokenInvalid},
		{"RefreshTokenByClaim", mint(func(c map[string]any) { c["typ"] = "Refresh" }), identity.ReasonTokenInvalid},
		{"TypClaimNotAString", mint(func(c map[string]any) { c["typ"] = 1 }), identity.ReasonTokenInvalid},
		{"LogoutTokenByHeader", mintTyped("logout+jwt"), identity.ReasonTokenInvalid},
		{"IDTokenByHeader", mintTyped("id_token+jwt"), identity.ReasonTokenInvalid},
		{"NoExpiry", mint(func(c map[string]any) { delete(c, "exp") }), identity.ReasonTokenExpired},
		{"ExpiryNotANumber", mint(func(c map[string]any) { c["exp"] = "tomorrow" }), identity.ReasonTokenInvalid},
		{"IssuedAtNotANumber", mint(func(c map[string]any) { c["iat"] = "yesterday" }), identity.ReasonTokenInvalid},
		{"IssuerNotAString", mint(func(c map[string]any) { c["iss"] = []string{iss.URL()} }), identity.ReasonTokenInvalid},
		{"AudienceNotStrings", mint(func(c map[string]any) { c["aud"] = []any{"api", 7} }), identity.ReasonTokenInvalid},
		{"NotValidForMoreThanFiveMinutes", mint(func(c map[string]any) { c["nbf"] = now.Add(6 * time.Minute).Unix() }), identity.ReasonTokenInvalid},
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
	// go-oidc's leeways and types, kept since the edge reads the claims
	// itself: nbf up to five minutes ahead, aud a single string, exp a
	// number in a string.
	t.Run("NotBeforeWithinFiveMinutesAndAudienceAsAStringAreAccepted", func(t *testing.T) {
		tok := mint(func(c map[string]any) {
			c["nbf"] = now.Add(4 * time.Minute).Unix()
			c["aud"] = "api"
			c["exp"] = fmt.Sprint(now.Add(time.Hour).Unix())
		})
		p, err := v.Verify(ctx(t), tok)
		if err != nil {
			t.Fatal(err)
		}
		if p.Subject == "" || p.Expiry.Before(now) {
			t.Fatalf("principal %+v: want a subject and the token's expiry", p)
		}
	})
	t.Run("AudienceMatchedByAzpOnlyWhenAsked", func(t *testing.T) {
		tok := mint(func(c map[string]any) { c["aud"] = []string{"account"}; c["azp"] = "api" })
		_, err := v.Verify(ctx(t), tok)
		wantReason(t, err, identity.ReasonTokenInvalid)
		azp := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", AzpAsAudience: true})
		if _, err := azp.Verify(ctx(t), tok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AccessTokenTypesAreAccepted", func(t *testing.T) {
		for _, typ := range []string{"at+jwt", "application/at+jwt", "JWT"} {
			c, _ := iss.Issuer.ClaimsFor("alice")
			tok, err := iss.Issuer.MintTyped(typ, c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(ctx(t), tok); err != nil {
				t.Errorf("header typ %s: %v", typ, err)
			}
		}
		if _, err := v.Verify(ctx(t), mint(func(c map[string]any) { delete(c, "typ") })); err != nil {
			t.Errorf("no typ claim: %v", err)
		}
	})
}

// A token naming a key the verifier has not seen makes it fetch the keys
// again, but not more than once per KeyRefetchInterval: a second rotation
// within the interval is accepted only once the interval has passed, its
// tokens refused as retryable until then.
func TestRotatedKeyIsAcceptedWithoutRestartWithinTheRefetchInterval(t *testing.T) {
	iss := start(t)
	clock := testenv.NewClock(time.Now())
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", KeyRefetchInterval: 10 * time.Second, Now: clock.Now})
	before, _ := iss.Issuer.TokenFor("alice")
	if _, err := v.Verify(ctx(t), before); err != nil {
		t.Fatal(err)
	}
	rotate := func() string {
		t.Helper()
		if _, err := iss.Issuer.RotateKey(); err != nil {
			t.Fatal(err)
		}
		tok, _ := iss.Issuer.TokenFor("alice")
		return tok
	}
	clock.Add(time.Second)
	if _, err := v.Verify(ctx(t), rotate()); err != nil {
		t.Fatalf("token signed with a key rotated after the first fetch: %v", err)
	}
	clock.Add(5 * time.Second)
	again := rotate()
	_, err := v.Verify(ctx(t), again)
	wantReason(t, err, identity.ReasonTokenInvalid)
	if ie := (*identity.Error)(nil); !errors.As(err, &ie) || !ie.Retryable {
		t.Fatalf("refusal of a token with a key not fetched yet is not retryable: %v", err)
	}
	if n := v.KeyFetches(); n != 2 {
		t.Fatalf("%d key fetches within the interval, want 2", n)
	}
	clock.Add(5 * time.Second)
	if _, err := v.Verify(ctx(t), again); err != nil {
		t.Fatalf("token signed with the new key, after the interval: %v", err)
	}
	if n := v.KeyFetches(); n != 3 {
		t.Fatalf("%d key fetches, want 3", n)
	}
}

// Forged tokens cost the issuer nothing: a bad signature under a known key
// id fetches nothing, and unknown key ids fetch at most once per interval.
func TestForgedTokensDoNotFetchKeysAgain(t *testing.T) {
	iss := start(t)
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", KeyRefetchInterval: time.Hour})
	good, _ := iss.Issuer.TokenFor("alice")
	if _, err := v.Verify(ctx(t), good); err != nil {
		t.Fatal(err)
	}
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		kid := iss.Issuer.KeyID() // the issuer's own key id
		switch i % 3 {
		case 1:
			kid = fmt.Sprintf("forged-%d", i)
		case 2:
			kid = ""
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: forger, KeyID: kid}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := iss.Issuer.ClaimsFor("service-account-svc-admin")
		tok, err := jwt.Signed(signer).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(ctx(t), tok)
		wantReason(t, err, identity.ReasonTokenInvalid)
	}
	if n := v.KeyFetches(); n > 2 {
		t.Fatalf("%d key fetches for 100 forged tokens, want at most 2 (the first, one for an unknown key id)", n)
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
	tok, _ := iss.Issuer.TokenFor("alice")
	if err := iss.Close(); err != nil {
		t.Fatal(err)
	}
	v := verifier(t, identity.Config{IssuerURL: url, Audience: "api", HTTPTimeout: time.Second})
	_, err := v.Verify(ctx(t), tok)
	wantReason(t, err, identity.ReasonIssuerUnavailable)
	if v.Ready(ctx(t)) == nil {
		t.Fatal("Ready with the issuer down")
	}
}

func TestAFirstCallWithA5msDeadlineDoesNotMakeLaterCallsFail(t *testing.T) {
	// Discovery takes longer than the first caller's deadline. It runs to
	// its own deadline for everyone, so the next caller is verified.
	iss := testkit.StartSlowIssuer(t, 200*time.Millisecond)
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api"})
	tok, err := iss.TokenFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err = v.Verify(short, tok)
	wantReason(t, err, identity.ReasonIssuerUnavailable) // its own deadline ran out
	if _, err := v.Verify(ctx(t), tok); err != nil {
		t.Fatalf("the call after a short-deadline one: %v", err)
	}
}

func TestReadyWaitsForDiscoveryAndTheIssuersKeys(t *testing.T) {
	iss := testkit.StartSlowIssuer(t, 0)
	iss.Down()
	clock := testenv.NewClock(time.Now())
	v := verifier(t, identity.Config{IssuerURL: iss.URL(), Audience: "api", Now: clock.Now})
	if err := v.Ready(ctx(t)); err == nil {
		t.Fatal("ready while discovery fails")
	}
	iss.Up()
	clock.Add(3 * time.Second) // past the pause between two discoveries
	if err := v.Ready(ctx(t)); err != nil {
		t.Fatalf("not ready with the issuer up: %v", err)
	}
	if n := v.KeyFetches(); n != 1 {
		t.Fatalf("ready after %d key fetches, want 1: the first token would wait for the keys", n)
	}
	tok, _ := iss.TokenFor("alice")
	if _, err := v.Verify(ctx(t), tok); err != nil {
		t.Fatal(err)
	}
	if n := v.KeyFetches(); n != 1 {
		t.Fatalf("%d key fetches after the first token, want 1", n)
	}
}
