package devissuer_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/internal/testenv"
)

// deviceAuth asks the device authorization endpoint for codes.
type deviceAuth struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                int64  `json:"interval"`
}

func postForm(t *testing.T, endpoint string, form url.Values) *http.Response {
	t.Helper()
	resp, err := http.PostForm(endpoint, form)
	if err != nil {
		t.Fatalf("POST %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func startDeviceAuth(t *testing.T, issuerURL, clientID string) deviceAuth {
	t.Helper()
	resp := postForm(t, issuerURL+"/protocol/openid-connect/auth/device", url.Values{"client_id": {clientID}})
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("device authorization: HTTP %d %s", resp.StatusCode, body)
	}
	var da deviceAuth
	decodeJSON(t, resp.Body, &da)
	return da
}

// pollDevice polls the token endpoint once and returns the HTTP status and body.
func pollDevice(t *testing.T, issuerURL, deviceCode string) (int, map[string]any) {
	t.Helper()
	resp := postForm(t, issuerURL+"/protocol/openid-connect/token", url.Values{
		"grant_type":  {"urn:ietf:params:oauth:grant-type:device_code"},
		"client_id":   {"cli"},
		"device_code": {deviceCode},
	})
	var body map[string]any
	decodeJSON(t, resp.Body, &body)
	return resp.StatusCode, body
}

// decide submits the approval page's form.
func decide(t *testing.T, pageURL, userCode, username, password, action string) (int, string) {
	t.Helper()
	resp := postForm(t, pageURL, url.Values{"user_code": {userCode}, "username": {username}, "password": {password}, "action": {action}})
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestDeviceLoginApprovedOnThePageGivesAPersonsTokensAndARefreshToken(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	srv := startIssuer(t, devissuer.Config{DevicePollInterval: time.Second, Now: clock.Now})
	da := startDeviceAuth(t, srv.URL(), "cli")
	if da.VerificationURI != srv.URL()+"/device" || da.VerificationURIComplete != da.VerificationURI+"?user_code="+da.UserCode ||
		da.Interval != 1 || da.ExpiresIn != 600 || len(da.UserCode) != 9 || da.DeviceCode == "" {
		t.Fatalf("device authorization response %+v", da)
	}
	if status, body := pollDevice(t, srv.URL(), da.DeviceCode); status != 400 || body["error"] != "authorization_pending" {
		t.Fatalf("before approval: HTTP %d %v, want 400 authorization_pending", status, body)
	}

	resp, err := http.Get(da.VerificationURIComplete)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `value="`+da.UserCode+`"`) || !strings.Contains(string(page), `name="password"`) {
		t.Fatalf("approval page: HTTP %d\n%s", resp.StatusCode, page)
	}
	if status, body := decide(t, da.VerificationURI, da.UserCode, "alice", "wrong", "approve"); status != 401 || !strings.Contains(body, "Invalid username or password") {
		t.Fatalf("wrong password: HTTP %d\n%s", status, body)
	}
	// The code as a person might type it: lower case, without the dash.
	typed := strings.ToLower(strings.ReplaceAll(da.UserCode, "-", ""))
	if status, body := decide(t, da.VerificationURI, typed, "alice", "alice", "approve"); status != 200 || !strings.Contains(body, "approved for alice") {
		t.Fatalf("approval: HTTP %d\n%s", status, body)
	}

	// Polled at the interval: the tokens.
	clock.Add(time.Second)
	status, body := pollDevice(t, srv.URL(), da.DeviceCode)
	if status != 200 {
		t.Fatalf("after approval: HTTP %d %v", status, body)
	}
	access, _ := body["access_token"].(string)
	refresh, _ := body["refresh_token"].(string)
	if c := mustVerify(t, srv.URL(), "api", access); c.PreferredUsername != "alice" || c.Azp != "cli" || *c.Plan != "free" {
		t.Errorf("claims %+v", c)
	}
	if refresh == "" || body["refresh_expires_in"] != 1800.0 || body["id_token"] == "" {
		t.Errorf("token response %v lacks a refresh token, its lifetime or an ID token", body)
	}
	// A device code gives tokens once.
	if status, body := pollDevice(t, srv.URL(), da.DeviceCode); status != 400 || body["error"] != "invalid_grant" {
		t.Errorf("second redemption: HTTP %d %v, want 400 invalid_grant", status, body)
	}
}

func TestDevicePolledTooFastIsSlowDownThenPendingAtTheLongerInterval(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	srv := startIssuer(t, devissuer.Config{DevicePollInterval: 2 * time.Second, Now: clock.Now})
	da := startDeviceAuth(t, srv.URL(), "cli")
	want := func(step, code string) {
		t.Helper()
		if status, body := pollDevice(t, srv.URL(), da.DeviceCode); status != 400 || body["error"] != code {
			t.Fatalf("%s: HTTP %d %v, want 400 %s", step, status, body, code)
		}
	}
	want("first poll", "authorization_pending")
	want("at once again", "slow_down") // the interval is now 7s
	clock.Add(2 * time.Second)
	want("2s later", "slow_down") // sooner than half of 7s; now 12s
	clock.Add(6 * time.Second)
	want("6s later", "authorization_pending")
}

func TestDeviceDeniedOnThePageIsAccessDenied(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	da := startDeviceAuth(t, srv.URL(), "cli")
	if status, body := decide(t, da.VerificationURI, da.UserCode, "bob", "bob", "deny"); status != 200 || !strings.Contains(body, "denied") {
		t.Fatalf("deny: HTTP %d\n%s", status, body)
	}
	if status, body := pollDevice(t, srv.URL(), da.DeviceCode); status != 400 || body["error"] != "access_denied" {
		t.Errorf("HTTP %d %v, want 400 access_denied", status, body)
	}
}

func TestDeviceCodeUnapprovedExpiresAndItsPageRefusesIt(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	srv := startIssuer(t, devissuer.Config{DeviceCodeTTL: time.Minute, Now: clock.Now})
	da := startDeviceAuth(t, srv.URL(), "cli")
	clock.Add(time.Minute)
	if status, body := decide(t, da.VerificationURI, da.UserCode, "alice", "alice", "approve"); status != 400 || !strings.Contains(body, "Invalid code") {
		t.Errorf("approving an expired code: HTTP %d\n%s", status, body)
	}
	if status, body := pollDevice(t, srv.URL(), da.DeviceCode); status != 400 || body["error"] != "expired_token" {
		t.Errorf("HTTP %d %v, want 400 expired_token", status, body)
	}
}

func TestDeviceGrantRefusedToAConfidentialClient(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	resp := postForm(t, srv.URL()+"/protocol/openid-connect/auth/device",
		url.Values{"client_id": {"svc-admin"}, "client_secret": {devissuer.DevClientSecret}})
	var body map[string]any
	decodeJSON(t, resp.Body, &body)
	if resp.StatusCode != 400 || body["error"] != "unauthorized_client" {
		t.Errorf("HTTP %d %v, want 400 unauthorized_client", resp.StatusCode, body)
	}
}

func TestRefreshTokenGivesNewTokensOnlyToItsClientAndUntilItExpires(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	cfg := devissuer.DefaultConfig()
	cfg.Clients = append(cfg.Clients, devissuer.Client{ID: "other-cli", Public: true})
	cfg.TokenTTL, cfg.RefreshTokenTTL, cfg.Now = 30*time.Second, 5*time.Minute, clock.Now
	srv := startIssuer(t, cfg)
	tokenURL := srv.URL() + "/protocol/openid-connect/token"
	resp := postForm(t, tokenURL, url.Values{"grant_type": {"password"}, "client_id": {"cli"}, "username": {"carol"}, "password": {"carol"}})
	var first map[string]any
	decodeJSON(t, resp.Body, &first)
	refresh, _ := first["refresh_token"].(string)
	if resp.StatusCode != 200 || refresh == "" || first["expires_in"] != 30.0 {
		t.Fatalf("password grant: HTTP %d %v", resp.StatusCode, first)
	}
	grant := func(clientID, token string) (int, map[string]any) {
		t.Helper()
		resp := postForm(t, tokenURL, url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {token}})
		var body map[string]any
		decodeJSON(t, resp.Body, &body)
		return resp.StatusCode, body
	}

	clock.Add(time.Minute) // the access token has expired; the refresh token has not
	status, body := grant("cli", refresh)
	if status != 200 {
		t.Fatalf("refresh: HTTP %d %v", status, body)
	}
	c := mustVerify(t, srv.URL(), "api", body["access_token"].(string))
	if c.PreferredUsername != "carol" || c.Azp != "cli" || c.Iat != clock.Now().Unix() {
		t.Errorf("refreshed claims %+v", c)
	}
	if next, _ := body["refresh_token"].(string); next == "" || next == refresh {
		t.Errorf("refresh gave no new refresh token: %v", body)
	}
	for _, tc := range []struct{ name, client, token string }{
		{"another client", "other-cli", refresh},
		{"not a token", "cli", "garbage"},
		{"an access token", "cli", body["access_token"].(string)},
	} {
		if status, body := grant(tc.client, tc.token); status != 400 || body["error"] != "invalid_grant" {
			t.Errorf("%s: HTTP %d %v, want 400 invalid_grant", tc.name, status, body)
		}
	}
	clock.Add(5 * time.Minute)
	if status, body := grant("cli", refresh); status != 400 || body["error"] != "invalid_grant" {
		t.Errorf("expired refresh token: HTTP %d %v, want 400 invalid_grant", status, body)
	}
}

func TestClientCredentialsGetNoRefreshToken(t *testing.T) {
	srv := startIssuer(t, devissuer.Config{})
	resp := postForm(t, srv.URL()+"/protocol/openid-connect/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"svc-viewer"}, "client_secret": {devissuer.DevClientSecret}})
	var body map[string]any
	decodeJSON(t, resp.Body, &body)
	if _, ok := body["refresh_token"]; ok || resp.StatusCode != 200 {
		t.Errorf("HTTP %d %v, want 200 without refresh_token", resp.StatusCode, body)
	}
}
