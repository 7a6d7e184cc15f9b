package devissuer_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/internal/testkit"
)

func TestDiscoveryAdvertisesKeycloakEndpoints(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/realms/dev") {
		t.Errorf("URL() = %q, want http://127.0.0.1:<port>/realms/dev", srv.URL())
	}
	var d struct {
		Issuer                   string   `json:"issuer"`
		TokenEndpoint            string   `json:"token_endpoint"`
		JWKSURI                  string   `json:"jwks_uri"`
		GrantTypes               []string `json:"grant_types_supported"`
		Algs                     []string `json:"id_token_signing_alg_values_supported"`
		ResponseTypes            []string `json:"response_types_supported"`
		SubjectTypes             []string `json:"subject_types_supported"`
		TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		Claims                   []string `json:"claims_supported"`
	}
	get(t, srv.URL()+"/.well-known/openid-configuration", &d)

	if d.Issuer != srv.URL() {
		t.Errorf("issuer = %q, want %q", d.Issuer, srv.URL())
	}
	if want := srv.URL() + "/protocol/openid-connect/token"; d.TokenEndpoint != want {
		t.Errorf("token_endpoint = %q, want %q", d.TokenEndpoint, want)
	}
	if want := srv.URL() + "/protocol/openid-connect/certs"; d.JWKSURI != want {
		t.Errorf("jwks_uri = %q, want %q", d.JWKSURI, want)
	}
	lists := []struct {
		field     string
		got, want []string
	}{
		{"grant_types_supported", d.GrantTypes, []string{"client_credentials", "password", "urn:ietf:params:oauth:grant-type:device_code", "refresh_token"}},
		{"id_token_signing_alg_values_supported", d.Algs, []string{"RS256"}},
		{"subject_types_supported", d.SubjectTypes, []string{"public"}},
		{"token_endpoint_auth_methods_supported", d.TokenEndpointAuthMethods, []string{"client_secret_post", "client_secret_basic"}},
	}
	for _, l := range lists {
		if !slices.Equal(l.got, l.want) {
			t.Errorf("%s = %q, want %q", l.field, l.got, l.want)
		}
	}
	if len(d.ResponseTypes) == 0 {
		t.Error("response_types_supported is empty; discovery requires it")
	}
	for _, c := range []string{"sub", "realm_access", "preferred_username", "email", "plan"} {
		if !slices.Contains(d.Claims, c) {
			t.Errorf("claims_supported %q lacks %q", d.Claims, c)
		}
	}
	if _, err := oidc.NewProvider(t.Context(), srv.URL()); err != nil {
		t.Errorf("oidc.NewProvider refuses the discovery document: %v", err)
	}
}

func TestOtherMethodsAre405AndUnknownPaths404(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	base := strings.TrimSuffix(srv.URL(), "/realms/dev")
	cases := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/realms/dev/protocol/openid-connect/token", http.StatusMethodNotAllowed},
		{http.MethodPut, "/realms/dev/protocol/openid-connect/token", http.StatusMethodNotAllowed},
		{http.MethodPost, "/realms/dev/.well-known/openid-configuration", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/realms/dev/protocol/openid-connect/certs", http.StatusMethodNotAllowed},
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/realms/dev", http.StatusNotFound},
		{http.MethodGet, "/realms/other/.well-known/openid-configuration", http.StatusNotFound},
		{http.MethodGet, "/realms/dev/protocol/openid-connect/userinfo", http.StatusNotFound},
		{http.MethodGet, "/realms/dev/protocol/openid-connect/auth", http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestTokenSignedAfterRotateKeyVerifiesAndJWKSListsBothKeys(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	iss := srv.Issuer
	oldKID := iss.KeyID()
	oldTok, err := testkit.ClientCredentials(t.Context(), nil, srv.URL(), "svc-admin", devissuer.DevClientSecret)
	if err != nil {
		t.Fatal(err)
	}

	newKID, err := iss.RotateKey()
	if err != nil {
		t.Fatalf("RotateKey: %v", err)
	}
	if newKID == oldKID || iss.KeyID() != newKID {
		t.Fatalf("after RotateKey: kid %q, KeyID() %q, old %q; want a new kid that signs", newKID, iss.KeyID(), oldKID)
	}
	newTok, err := testkit.ClientCredentials(t.Context(), nil, srv.URL(), "svc-admin", devissuer.DevClientSecret)
	if err != nil {
		t.Fatal(err)
	}
	if kid := headerKID(t, newTok); kid != newKID {
		t.Errorf("new token kid = %q, want %q", kid, newKID)
	}

	if got, want := jwksKIDs(t, srv.URL()), []string{oldKID, newKID}; !slices.Equal(got, want) {
		t.Errorf("JWKS kids = %q, want %q", got, want)
	}
	mustVerify(t, srv.URL(), "api", newTok)
	mustVerify(t, srv.URL(), "api", oldTok)
}

func TestRetiredKeyLeavesJWKSAndItsTokensStopVerifying(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	iss := srv.Issuer
	oldKID := iss.KeyID()
	oldTok, err := iss.TokenFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	newKID, err := iss.RotateKey()
	if err != nil {
		t.Fatal(err)
	}

	if err := iss.RetireKey(newKID); err == nil {
		t.Error("RetireKey(signing key) succeeded, want an error")
	}
	if err := iss.RetireKey("no-such-kid"); err == nil {
		t.Error("RetireKey(unknown kid) succeeded, want an error")
	}
	if err := iss.RetireKey(oldKID); err != nil {
		t.Fatalf("RetireKey(old): %v", err)
	}

	if got := jwksKIDs(t, srv.URL()); !slices.Equal(got, []string{newKID}) {
		t.Errorf("JWKS kids = %q, want only %q", got, newKID)
	}
	if _, err := verify(t, srv.URL(), "api", oldTok); err == nil {
		t.Error("token signed by the retired key verified, want it refused")
	}
}

func TestMintedTokenWithPastExpRejectedByGoOIDCAsExpired(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	c, err := srv.Issuer.ClaimsFor("bob")
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).Unix()
	c["iat"], c["exp"] = past-600, past
	tok, err := srv.Issuer.Mint(c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	_, err = verify(t, srv.URL(), "api", tok)
	if _, ok := errors.AsType[*oidc.TokenExpiredError](err); !ok {
		t.Errorf("verify error = %v, want *oidc.TokenExpiredError", err)
	}
}

func TestMintedTokenForOtherAudienceRejected(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	c, err := srv.Issuer.ClaimsFor("service-account-svc-admin")
	if err != nil {
		t.Fatal(err)
	}
	c["aud"] = []string{"someone-else"}
	tok, err := srv.Issuer.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, srv.URL(), "api", tok); err == nil {
		t.Error("token for audience someone-else verified for api, want it refused")
	}
}

func TestTokenForGivesTheClaimsOfTheTokenEndpoint(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	cases := []struct {
		name, wantUsername, wantAzp string
		wantRoles                   []string
	}{
		{"carol", "carol", "cli", []string{}},
		{"pro-42", "pro-42", "cli", []string{}},
		{"service-account-svc-env-manager", "service-account-svc-env-manager", "svc-env-manager", []string{"svc-env-manager"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := srv.Issuer.TokenFor(tc.name)
			if err != nil {
				t.Fatalf("TokenFor: %v", err)
			}
			c := mustVerify(t, srv.URL(), "api", tok)
			if c.PreferredUsername != tc.wantUsername || c.Azp != tc.wantAzp || !slices.Equal(c.RealmAccess.Roles, tc.wantRoles) {
				t.Errorf("preferred_username %q azp %q roles %q, want %q %q %q",
					c.PreferredUsername, c.Azp, c.RealmAccess.Roles, tc.wantUsername, tc.wantAzp, tc.wantRoles)
			}
		})
	}
	for _, name := range []string{"mallory", "service-account-cli", "service-account-nobody"} {
		if _, err := srv.Issuer.TokenFor(name); err == nil {
			t.Errorf("TokenFor(%q) succeeded, want an error", name)
		}
	}
}

func TestSubjectStableAcrossIssuerInstancesAndDistinctPerSubject(t *testing.T) {
	subs := func(srv *devissuer.Server) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, u := range []struct{ name, password string }{{"alice", "alice"}, {"bob", "bob"}, {"pro-1", "dev"}} {
			tok, err := devissuer.Password(t.Context(), nil, srv.URL(), "cli", u.name, u.password)
			if err != nil {
				t.Fatalf("Password(%s): %v", u.name, err)
			}
			out[u.name] = mustVerify(t, srv.URL(), "api", tok).Sub
		}
		for _, id := range []string{"svc-admin", "svc-viewer"} {
			tok, err := testkit.ClientCredentials(t.Context(), nil, srv.URL(), id, devissuer.DevClientSecret)
			if err != nil {
				t.Fatalf("ClientCredentials(%s): %v", id, err)
			}
			out[id] = mustVerify(t, srv.URL(), "api", tok).Sub
		}
		return out
	}
	first := subs(startIssuer(t, devissuer.Config{}))
	second := subs(startIssuer(t, devissuer.Config{}))

	seen := map[string]string{}
	for who, sub := range first {
		if second[who] != sub {
			t.Errorf("%s: sub %q on one issuer, %q on another", who, sub, second[who])
		}
		if other, dup := seen[sub]; dup {
			t.Errorf("%s and %s share sub %q", who, other, sub)
		}
		seen[sub] = who
	}
	if first["alice"] != devissuer.UserSubject("dev", "alice") {
		t.Errorf("alice's sub %q != UserSubject(dev, alice) %q", first["alice"], devissuer.UserSubject("dev", "alice"))
	}
}

func TestBaseURLPathPrefixIsKept(t *testing.T) {
	iss, err := devissuer.New("http://idp.example.test/auth/", devissuer.Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if want := "http://idp.example.test/auth/realms/dev"; iss.URL() != want {
		t.Errorf("URL() = %q, want %q", iss.URL(), want)
	}
	rec := httptest.NewRecorder()
	iss.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/realms/dev/.well-known/openid-configuration", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"issuer":"http://idp.example.test/auth/realms/dev"`) {
		t.Errorf("discovery under the prefix: HTTP %d %s", rec.Code, rec.Body)
	}
}

func TestNewRefusesConfigItCannotServe(t *testing.T) {
	cases := []struct {
		name    string
		baseURL string
		cfg     devissuer.Config
	}{
		{"base URL without scheme", "127.0.0.1:8081", devissuer.Config{}},
		{"base URL not http", "ftp://127.0.0.1", devissuer.Config{}},
		{"issuer URL given as base URL", "http://127.0.0.1:8081/realms/dev", devissuer.Config{}},
		{"base URL with query", "http://127.0.0.1:8081?x=1", devissuer.Config{}},
		{"realm with slash", "http://h", devissuer.Config{Realm: "a/b"}},
		{"TTL under a second", "http://h", devissuer.Config{TokenTTL: time.Millisecond}},
		{"negative TTL", "http://h", devissuer.Config{TokenTTL: -time.Minute}},
		{"empty audience", "http://h", devissuer.Config{Audience: []string{""}}},
		{"client listed twice", "http://h", devissuer.Config{Clients: []devissuer.Client{{ID: "a", Secret: "s"}, {ID: "a", Secret: "t"}}}},
		{"confidential client without secret", "http://h", devissuer.Config{Clients: []devissuer.Client{{ID: "a"}}}},
		{"public client with secret", "http://h", devissuer.Config{Clients: []devissuer.Client{{ID: "a", Secret: "s", Public: true}}}},
		{"user in upper case", "http://h", devissuer.Config{Users: []devissuer.User{{Username: "Dave", Password: "p"}}}},
		{"user without password", "http://h", devissuer.Config{Users: []devissuer.User{{Username: "dave"}}}},
		{"user named like a service account", "http://h", devissuer.Config{Users: []devissuer.User{{Username: "service-account-x", Password: "p"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := devissuer.New(tc.baseURL, tc.cfg); err == nil {
				t.Error("New succeeded, want an error")
			}
		})
	}
}

func TestDefaultConfigServesTheSameFixturesAsZeroConfig(t *testing.T) {
	cfg := devissuer.DefaultConfig()
	if cfg.Realm != "dev" || !slices.Equal(cfg.Audience, []string{"api"}) || cfg.TokenTTL != 10*time.Minute || cfg.DisablePlanUsers {
		t.Errorf("DefaultConfig() = realm %q audience %q TTL %v plan users off %v", cfg.Realm, cfg.Audience, cfg.TokenTTL, cfg.DisablePlanUsers)
	}
	var ids []string
	for _, c := range cfg.Clients {
		ids = append(ids, c.ID)
	}
	if want := []string{"svc-admin", "svc-env-manager", "svc-viewer", "cli"}; !slices.Equal(ids, want) {
		t.Errorf("clients %q, want %q", ids, want)
	}
	srv := startIssuer(t, cfg)
	if _, err := devissuer.Password(t.Context(), nil, srv.URL(), "cli", "carol", "carol"); err != nil {
		t.Errorf("carol through DefaultConfig: %v", err)
	}
}

// headerKID returns the kid of a compact JWS, unverified.
func headerKID(t *testing.T, token string) string {
	t.Helper()
	var h struct {
		KID string `json:"kid"`
		Typ string `json:"typ"`
		Alg string `json:"alg"`
	}
	decodeSegment(t, token, 0, &h)
	if h.Typ != "JWT" || h.Alg != "RS256" {
		t.Errorf("header typ %q alg %q, want JWT RS256", h.Typ, h.Alg)
	}
	return h.KID
}
