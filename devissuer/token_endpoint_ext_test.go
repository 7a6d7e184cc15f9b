package devissuer_test

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/internal/testkit"
)

func TestServiceAccountTokenVerifiesWithGoOIDCAndCarriesItsRole(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	for _, client := range []string{"svc-admin", "svc-env-manager", "svc-viewer"} {
		t.Run(client, func(t *testing.T) {
			tok, err := testkit.ClientCredentials(t.Context(), nil, srv.URL(), client, devissuer.DevClientSecret)
			if err != nil {
				t.Fatalf("ClientCredentials: %v", err)
			}
			c := mustVerify(t, srv.URL(), "api", tok)

			if c.Iss != srv.URL() {
				t.Errorf("iss = %q, want %q", c.Iss, srv.URL())
			}
			if want := devissuer.ServiceAccountSubject("dev", client); c.Sub != want {
				t.Errorf("sub = %q, want %q", c.Sub, want)
			}
			if !slices.Equal(c.Aud, []string{"api"}) {
				t.Errorf("aud = %q, want [api]", c.Aud)
			}
			if c.Exp-c.Iat != 600 {
				t.Errorf("exp - iat = %ds, want 600s", c.Exp-c.Iat)
			}
			if c.Azp != client {
				t.Errorf("azp = %q, want %q", c.Azp, client)
			}
			if c.RealmAccess == nil || !slices.Equal(c.RealmAccess.Roles, []string{client}) {
				t.Errorf("realm_access = %+v, want roles [%s]", c.RealmAccess, client)
			}
			if want := "service-account-" + client; c.PreferredUsername != want {
				t.Errorf("preferred_username = %q, want %q", c.PreferredUsername, want)
			}
			if c.Typ != "Bearer" || c.Scope != "openid profile email" || c.Jti == "" {
				t.Errorf("typ %q scope %q jti %q, want Bearer, openid profile email, non-empty", c.Typ, c.Scope, c.Jti)
			}
			if c.Email != nil || c.EmailVerified != nil || c.Plan != nil || c.Name != nil {
				t.Errorf("service account has person claims: email %v email_verified %v name %v plan %v",
					c.Email, c.EmailVerified, c.Name, c.Plan)
			}
		})
	}
}

func TestPasswordGrantTokenCarriesEmailNameAndPlan(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	cases := []struct {
		username, password string
		wantUsername       string
		wantEmail          string
		wantName           string
		wantPlan           string
	}{
		{"alice", "alice", "alice", "alice@example.com", "Alice", "free"},
		{"bob", "bob", "bob", "bob@example.com", "Bob", "pro"},
		{"carol", "carol", "carol", "carol@example.com", "Carol", "enterprise"},
		{"pro-xyz", "dev", "pro-xyz", "pro-xyz@example.com", "pro-xyz", "pro"},
		{"free-1", "dev", "free-1", "free-1@example.com", "free-1", "free"},
		{"enterprise-load.test_3-x", "dev", "enterprise-load.test_3-x", "enterprise-load.test_3-x@example.com", "enterprise-load.test_3-x", "enterprise"},
		{"Alice", "alice", "alice", "alice@example.com", "Alice", "free"}, // usernames are case-insensitive, as in Keycloak
	}
	for _, tc := range cases {
		t.Run(tc.username, func(t *testing.T) {
			tok, err := devissuer.Password(t.Context(), nil, srv.URL(), devissuer.DevPublicClient, tc.username, tc.password)
			if err != nil {
				t.Fatalf("Password: %v", err)
			}
			c := mustVerify(t, srv.URL(), "api", tok)

			if want := devissuer.UserSubject("dev", tc.wantUsername); c.Sub != want {
				t.Errorf("sub = %q, want %q", c.Sub, want)
			}
			if c.PreferredUsername != tc.wantUsername {
				t.Errorf("preferred_username = %q, want %q", c.PreferredUsername, tc.wantUsername)
			}
			if c.Azp != "cli" {
				t.Errorf("azp = %q, want cli", c.Azp)
			}
			if c.Email == nil || *c.Email != tc.wantEmail {
				t.Errorf("email = %v, want %q", c.Email, tc.wantEmail)
			}
			if c.EmailVerified == nil || !*c.EmailVerified {
				t.Errorf("email_verified = %v, want true", c.EmailVerified)
			}
			if c.Name == nil || *c.Name != tc.wantName {
				t.Errorf("name = %v, want %q", c.Name, tc.wantName)
			}
			if c.Plan == nil || *c.Plan != tc.wantPlan {
				t.Errorf("plan = %v, want %q", c.Plan, tc.wantPlan)
			}
			if c.RealmAccess == nil || len(c.RealmAccess.Roles) != 0 {
				t.Errorf("realm_access = %+v, want present with no roles", c.RealmAccess)
			}
			if !slices.Equal(c.Aud, []string{"api"}) || c.Exp-c.Iat != 600 {
				t.Errorf("aud %q, exp - iat %ds, want [api], 600s", c.Aud, c.Exp-c.Iat)
			}
		})
	}
}

func TestTokenResponseHasKeycloakFieldsAndNoStore(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	resp := post(t, srv.URL(), "application/x-www-form-urlencoded",
		"grant_type=client_credentials&client_id=svc-admin&client_secret=dev-secret", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var body map[string]any
	decodeJSON(t, resp.Body, &body)
	if tok, _ := body["access_token"].(string); tok == "" {
		t.Errorf("access_token missing in %v", body)
	}
	want := map[string]any{
		"expires_in":         600.0,
		"refresh_expires_in": 0.0,
		"token_type":         "Bearer",
		"not-before-policy":  0.0,
		"scope":              "openid profile email",
	}
	for k, v := range want {
		if got, ok := body[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

func TestClientCredentialsWithHTTPBasicGetsToken(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	resp := post(t, srv.URL(), "application/x-www-form-urlencoded", "grant_type=client_credentials",
		url.UserPassword("svc-viewer", devissuer.DevClientSecret))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", resp.StatusCode)
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	decodeJSON(t, resp.Body, &body)
	if c := mustVerify(t, srv.URL(), "api", body.AccessToken); c.Azp != "svc-viewer" {
		t.Errorf("azp = %q, want svc-viewer", c.Azp)
	}
}

func TestTokenEndpointRefusesWithKeycloakErrors(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	const form = "application/x-www-form-urlencoded"
	cases := []struct {
		name        string
		contentType string
		body        string
		basic       *url.Userinfo
		wantStatus  int
		wantCode    string
	}{
		{"wrong client secret is 401 unauthorized_client", form,
			"grant_type=client_credentials&client_id=svc-admin&client_secret=nope", nil, 401, "unauthorized_client"},
		{"missing client secret is 401 unauthorized_client", form,
			"grant_type=client_credentials&client_id=svc-admin", nil, 401, "unauthorized_client"},
		{"unknown client is 401 unauthorized_client", form,
			"grant_type=client_credentials&client_id=svc-nobody&client_secret=dev-secret", nil, 401, "unauthorized_client"},
		{"wrong secret by Basic is 401 unauthorized_client", form,
			"grant_type=client_credentials", url.UserPassword("svc-admin", "nope"), 401, "unauthorized_client"},
		{"wrong password is 401 invalid_grant", form,
			"grant_type=password&client_id=cli&username=alice&password=bob", nil, 401, "invalid_grant"},
		{"unknown user is 401 invalid_grant", form,
			"grant_type=password&client_id=cli&username=mallory&password=mallory", nil, 401, "invalid_grant"},
		{"password grant on a service-account client is 400 unauthorized_client", form,
			"grant_type=password&client_id=svc-admin&client_secret=dev-secret&username=alice&password=alice", nil, 400, "unauthorized_client"},
		{"client_credentials on the public client is 400 unauthorized_client", form,
			"grant_type=client_credentials&client_id=cli", nil, 400, "unauthorized_client"},
		{"unknown grant type is 400 unsupported_grant_type", form,
			"grant_type=authorization_code&client_id=cli&code=x", nil, 400, "unsupported_grant_type"},
		{"missing grant type is 400 invalid_request", form,
			"client_id=svc-admin&client_secret=dev-secret", nil, 400, "invalid_request"},
		{"missing client id is 400 invalid_request", form,
			"grant_type=client_credentials&client_secret=dev-secret", nil, 400, "invalid_request"},
		{"missing password is 400 invalid_request", form,
			"grant_type=password&client_id=cli&username=alice", nil, 400, "invalid_request"},
		{"JSON body is 400 invalid_request", "application/json",
			`{"grant_type":"client_credentials","client_id":"svc-admin","client_secret":"dev-secret"}`, nil, 400, "invalid_request"},
		{"no content type is 400 invalid_request", "",
			"grant_type=client_credentials&client_id=svc-admin&client_secret=dev-secret", nil, 400, "invalid_request"},
		{"repeated parameter is 400 invalid_request", form,
			"grant_type=client_credentials&client_id=svc-admin&client_id=svc-viewer&client_secret=dev-secret", nil, 400, "invalid_request"},
		{"secret both in Basic and in the body is 400 invalid_request", form,
			"grant_type=client_credentials&client_secret=dev-secret", url.UserPassword("svc-admin", "dev-secret"), 400, "invalid_request"},
		{"body over 64 KiB is 400 invalid_request", form,
			"grant_type=client_credentials&client_id=svc-admin&client_secret=dev-secret&pad=" + strings.Repeat("x", 64<<10), nil, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, srv.URL(), tc.contentType, tc.body, tc.basic)
			var body struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
				AccessToken string `json:"access_token"`
			}
			decodeJSON(t, resp.Body, &body)
			if resp.StatusCode != tc.wantStatus || body.Error != tc.wantCode {
				t.Errorf("HTTP %d %q (%s), want HTTP %d %q", resp.StatusCode, body.Error, body.Description, tc.wantStatus, tc.wantCode)
			}
			if body.Description == "" || body.AccessToken != "" {
				t.Errorf("error_description %q, access_token %q: want a description and no token", body.Description, body.AccessToken)
			}
		})
	}
}

func TestFetchTokenErrorCarriesStatusAndKeycloakCode(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	cases := []struct {
		name            string
		fetch           func() (string, error)
		wantStatus      int
		wantCode        string
		wantDescription string
	}{
		{"wrong secret", func() (string, error) {
			return testkit.ClientCredentials(t.Context(), nil, srv.URL(), "svc-admin", "wrong")
		}, 401, "unauthorized_client", "Invalid client or Invalid client credentials"},
		{"wrong password", func() (string, error) {
			return devissuer.Password(t.Context(), nil, srv.URL(), "cli", "alice", "wrong")
		}, 401, "invalid_grant", "Invalid user credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.fetch()
			tokErr, ok := errors.AsType[*devissuer.TokenError](err)
			if !ok {
				t.Fatalf("got token %q, error %v; want a *TokenError", tok, err)
			}
			want := devissuer.TokenError{Status: tc.wantStatus, Code: tc.wantCode, Description: tc.wantDescription}
			if *tokErr != want {
				t.Errorf("TokenError = %+v, want %+v", *tokErr, want)
			}
		})
	}
}

func TestGeneratedPlanUserRefused(t *testing.T) {
	cases := []struct {
		name     string
		cfg      devissuer.Config
		username string
		password string
	}{
		{"free user with wrong password", devissuer.Config{}, "free-abc", "free-abc"},
		{"empty suffix", devissuer.Config{}, "pro-", "dev"},
		{"unknown plan", devissuer.Config{}, "gold-1", "dev"},
		{"character outside a-z0-9._-", devissuer.Config{}, "pro-a+b", "dev"},
		{"longer than 64 characters", devissuer.Config{}, "pro-" + strings.Repeat("x", 61), "dev"},
		{"plan users turned off", devissuer.Config{DisablePlanUsers: true}, "pro-xyz", "dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startIssuer(t, tc.cfg)
			_, err := devissuer.Password(t.Context(), nil, srv.URL(), "cli", tc.username, tc.password)
			tokErr, ok := errors.AsType[*devissuer.TokenError](err)
			if !ok || tokErr.Status != 401 || tokErr.Code != "invalid_grant" {
				t.Errorf("error %v, want 401 invalid_grant", err)
			}
		})
	}
}

func TestCustomRealmAudienceAndTTLShowInTokens(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{
		Realm:    "test",
		Audience: []string{"edge", "orgsvc"},
		TokenTTL: 90 * time.Second,
		Clients:  []devissuer.Client{{ID: "robot", Secret: "s3cret", Roles: []string{"svc-viewer", "extra"}}},
		Users:    []devissuer.User{{Username: "dave", Password: "pw"}},
	})
	if !strings.HasSuffix(srv.URL(), "/realms/test") {
		t.Errorf("URL() = %q, want it to end in /realms/test", srv.URL())
	}
	tok, err := testkit.ClientCredentials(t.Context(), nil, srv.URL(), "robot", "s3cret")
	if err != nil {
		t.Fatalf("ClientCredentials: %v", err)
	}
	c := mustVerify(t, srv.URL(), "orgsvc", tok)
	if !slices.Equal(c.Aud, []string{"edge", "orgsvc"}) || c.Exp-c.Iat != 90 {
		t.Errorf("aud %q, exp - iat %ds; want [edge orgsvc], 90s", c.Aud, c.Exp-c.Iat)
	}
	if !slices.Equal(c.RealmAccess.Roles, []string{"svc-viewer", "extra"}) {
		t.Errorf("roles = %q, want [svc-viewer extra]", c.RealmAccess.Roles)
	}
	if c.Sub != devissuer.ServiceAccountSubject("test", "robot") {
		t.Errorf("sub = %q, want ServiceAccountSubject(test, robot)", c.Sub)
	}

	// Without a public client, no one may use the password grant; without the
	// fixtures, alice is unknown.
	_, err = devissuer.Password(t.Context(), nil, srv.URL(), "cli", "alice", "alice")
	if tokErr, ok := errors.AsType[*devissuer.TokenError](err); !ok || tokErr.Code != "unauthorized_client" {
		t.Errorf("password grant through unknown cli: %v, want unauthorized_client", err)
	}
	_, err = devissuer.Password(t.Context(), nil, srv.URL(), "robot", "dave", "pw")
	if tokErr, ok := errors.AsType[*devissuer.TokenError](err); !ok || tokErr.Status != 401 {
		// robot is confidential and the secret is missing: client authentication fails first.
		t.Errorf("password grant through robot without secret: %v, want 401", err)
	}
}

func TestConcurrentTokenRequestsWhileRotatingAllVerify(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	const workers, perWorker, rotations = 8, 5, 3

	var wg sync.WaitGroup
	tokens := make(chan string, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				var tok string
				var err error
				if w%2 == 0 {
					tok, err = testkit.ClientCredentials(t.Context(), nil, srv.URL(), "svc-admin", devissuer.DevClientSecret)
				} else {
					tok, err = devissuer.Password(t.Context(), nil, srv.URL(), "cli", "bob", "bob")
				}
				if err != nil {
					t.Errorf("token request: %v", err)
					return
				}
				tokens <- tok
			}
		})
	}
	for range rotations {
		if _, err := srv.Issuer.RotateKey(); err != nil {
			t.Errorf("RotateKey: %v", err)
		}
	}
	wg.Wait()
	close(tokens)

	if got := len(jwksKIDs(t, srv.URL())); got != rotations+1 {
		t.Errorf("JWKS has %d keys, want %d", got, rotations+1)
	}
	for tok := range tokens {
		mustVerify(t, srv.URL(), "api", tok)
	}
}

// As Keycloak does, the token endpoint sends an ID token for the client along
// with the access token: typ ID, aud the client, bound by at_hash.
func TestIDTokenComesWithTheAccessTokenAsKeycloakSendsIt(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	toks, err := devissuer.FetchTokens(t.Context(), nil, srv.URL(), url.Values{
		"grant_type": {"password"}, "client_id": {devissuer.DevPublicClient}, "username": {"carol"}, "password": {"carol"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if toks.IDToken == "" || toks.IDToken == toks.AccessToken {
		t.Fatalf("ID token %q", toks.IDToken)
	}
	access := mustVerify(t, srv.URL(), devissuer.DefaultAudience, toks.AccessToken)
	// The ID token is not for the API.
	if _, err := verify(t, srv.URL(), devissuer.DefaultAudience, toks.IDToken); err == nil {
		t.Error("the ID token names the API's audience")
	}
	provider, err := oidc.NewProvider(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: devissuer.DevPublicClient}).Verify(t.Context(), toks.IDToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := idt.VerifyAccessToken(toks.AccessToken); err != nil {
		t.Errorf("at_hash: %v", err)
	}
	var id struct {
		Aud         string `json:"aud"` // one client: a string, as Keycloak writes it
		Typ, Azp    string
		Email       string `json:"email"`
		RealmAccess any    `json:"realm_access"`
		Plan        *string
	}
	if err := idt.Claims(&id); err != nil {
		t.Fatal(err)
	}
	if id.Typ != "ID" || id.Aud != devissuer.DevPublicClient || id.Azp != devissuer.DevPublicClient || id.RealmAccess != nil || id.Plan != nil || id.Email != "carol@example.com" {
		t.Errorf("ID token claims %+v", id)
	}
	if access.Typ != "Bearer" || idt.Subject != access.Sub {
		t.Errorf("access token typ %q sub %q, ID token sub %q", access.Typ, access.Sub, idt.Subject)
	}
}
