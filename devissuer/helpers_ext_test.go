package devissuer_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/orgedge/edge/devissuer"
)

// startIssuer serves an issuer for cfg on a real socket until the test ends.
func startIssuer(t *testing.T, cfg devissuer.Config) *devissuer.Server {
	t.Helper()
	srv, err := devissuer.Start("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// claims are the claims the tests read; pointers tell absent from empty.
type claims struct {
	Iss         string   `json:"iss"`
	Sub         string   `json:"sub"`
	Aud         []string `json:"aud"`
	Exp         int64    `json:"exp"`
	Iat         int64    `json:"iat"`
	Jti         string   `json:"jti"`
	Typ         string   `json:"typ"`
	Azp         string   `json:"azp"`
	Scope       string   `json:"scope"`
	RealmAccess *struct {
		Roles []string `json:"roles"`
	} `json:"realm_access"`
	PreferredUsername string  `json:"preferred_username"`
	Email             *string `json:"email"`
	EmailVerified     *bool   `json:"email_verified"`
	Name              *string `json:"name"`
	Plan              *string `json:"plan"`
}

// verify checks token the way the edge does: go-oidc, discovery and JWKS
// fetched afresh from issuerURL, audience audience.
func verify(t *testing.T, issuerURL, audience, token string) (claims, error) {
	t.Helper()
	provider, err := oidc.NewProvider(t.Context(), issuerURL)
	if err != nil {
		t.Fatalf("oidc.NewProvider(%s): %v", issuerURL, err)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: audience}).Verify(t.Context(), token)
	if err != nil {
		return claims{}, err
	}
	var c claims
	if err := idt.Claims(&c); err != nil {
		t.Fatalf("decode claims: %v", err)
	}
	return c, nil
}

// mustVerify is verify for a token that must pass.
func mustVerify(t *testing.T, issuerURL, audience, token string) claims {
	t.Helper()
	c, err := verify(t, issuerURL, audience, token)
	if err != nil {
		t.Fatalf("go-oidc refused the token: %v", err)
	}
	return c
}

// post sends a raw token request, for requests devissuer.FetchToken would not send.
func post(t *testing.T, issuerURL, contentType, body string, basic *url.Userinfo) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		issuerURL+"/protocol/openid-connect/token", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if basic != nil {
		pass, _ := basic.Password()
		req.SetBasicAuth(url.QueryEscape(basic.Username()), url.QueryEscape(pass))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST token: %v", err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// decodeJSON reads the whole body into v.
func decodeJSON(t *testing.T, r io.Reader, v any) {
	t.Helper()
	if err := json.NewDecoder(r).Decode(v); err != nil {
		t.Fatalf("decode JSON body: %v", err)
	}
}

// get fetches url and decodes its JSON body into v.
func get(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d, want 200", url, resp.StatusCode)
	}
	decodeJSON(t, resp.Body, v)
}

// jwksKIDs returns the kids the issuer publishes.
func jwksKIDs(t *testing.T, issuerURL string) []string {
	t.Helper()
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
			Kty string `json:"kty"`
			Alg string `json:"alg"`
			Use string `json:"use"`
		} `json:"keys"`
	}
	get(t, issuerURL+"/protocol/openid-connect/certs", &set)
	var kids []string
	for _, k := range set.Keys {
		if k.Kty != "RSA" || k.Alg != "RS256" || k.Use != "sig" {
			t.Errorf("JWKS key %s: kty %q alg %q use %q, want RSA RS256 sig", k.KID, k.Kty, k.Alg, k.Use)
		}
		kids = append(kids, k.KID)
	}
	return kids
}

// decodeSegment decodes part i of a compact JWS into v, unverified.
func decodeSegment(t *testing.T, token string, i int, v any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatalf("decode part %d: %v", i, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode part %d: %v", i, err)
	}
}
