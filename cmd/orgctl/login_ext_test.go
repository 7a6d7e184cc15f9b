package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/devissuer"
)

// storedSession reads the session file the command keeps for a context.
func storedSession(t *testing.T, c *cli, context string) (map[string]any, os.FileInfo) {
	t.Helper()
	path := filepath.Join(c.configDir, "orgctl", "tokens", context+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("session file: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("session file: %v", err)
	}
	return s, info
}

func TestDeviceLoginApprovedInTheBrowserThenCommandsRunAsThatPerson(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st)

	if r := c.run("orgs", "list"); r.code != 3 || !strings.Contains(r.stderr, "orgctl login") {
		t.Fatalf("before login: %s\nwant exit 3 telling to log in", r)
	}
	r := c.login("alice", "alice")
	if r.code != 0 || !strings.Contains(r.stderr, "Logged in to dev as alice") || !strings.Contains(r.stderr, "/device?user_code=") {
		t.Fatalf("login: %s", r)
	}
	sess, info := storedSession(t, c, "dev")
	access, _ := sess["accessToken"].(string)
	refresh, _ := sess["refreshToken"].(string)
	if access == "" || refresh == "" || sess["username"] != "alice" {
		t.Fatalf("session %v lacks tokens or the user", sess)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, want 0600", info.Mode().Perm())
	}
	dir, err := os.Stat(filepath.Dir(filepath.Join(c.configDir, "orgctl", "tokens", "dev.json")))
	if err != nil || dir.Mode().Perm() != 0o700 {
		t.Errorf("token directory: %v, %v; want mode 0700", dir.Mode().Perm(), err)
	}
	if strings.Contains(r.stdout+r.stderr, access) || strings.Contains(r.stdout+r.stderr, refresh) {
		t.Error("login printed a token")
	}
	// Polled at the issuer's interval (1s): no slow_down was needed.
	if n := st.tokenRequests("urn:ietf:params:oauth:grant-type:device_code"); n < 1 {
		t.Errorf("%d device-code polls", n)
	}

	created := c.mustRun("orgs", "create", "acme", "--billing-email", "billing@acme.example")
	if !strings.Contains(created.stdout, "acme") || !strings.Contains(created.stdout, "Billing email") {
		t.Errorf("create printed:\n%s", created.stdout)
	}
	who := c.mustRun("whoami")
	if !strings.Contains(who.stdout, "alice") || strings.Contains(who.stdout, access) {
		t.Errorf("whoami:\n%s", who.stdout)
	}
	c.mustRun("logout")
	if r := c.run("orgs", "list"); r.code != 3 {
		t.Errorf("after logout: %s\nwant exit 3", r)
	}
}

func TestTokenAboutToExpireIsRefreshedBeforeTheCallWithoutTheUserNoticing(t *testing.T) {
	t.Parallel()
	// Tokens live 30s; the command refreshes one that expires within 10s.
	// (With 12s, logging in and the first call had to take under 2s, which
	// a busy machine does not promise.)
	st := startStack(t, stackOptions{tokenTTL: 30 * time.Second})
	c := newCLI(t, st)
	c.login("bob", "bob")
	before, _ := storedSession(t, c, "dev")

	c.mustRun("orgs", "list")
	if now, _ := storedSession(t, c, "dev"); now["accessToken"] != before["accessToken"] || st.tokenRequests("refresh_token") != 0 {
		t.Fatal("a fresh token was refreshed")
	}

	expiry, err := time.Parse(time.RFC3339Nano, before["expiry"].(string))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the clock, not for a race: until the token is within the
	// refresh margin of its expiry.
	for time.Until(expiry) > 9*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	r := c.mustRun("orgs", "create", "refreshed", "--billing-email", "b@example.com")
	if r.stderr != "" {
		t.Errorf("the refresh showed: %q", r.stderr)
	}
	after, _ := storedSession(t, c, "dev")
	if after["accessToken"] == before["accessToken"] || after["refreshToken"] == "" || st.tokenRequests("refresh_token") != 1 {
		t.Fatalf("no refresh: %d refresh requests", st.tokenRequests("refresh_token"))
	}
	newExpiry, _ := time.Parse(time.RFC3339Nano, after["expiry"].(string))
	if !newExpiry.After(expiry) {
		t.Errorf("expiry %v after refresh, was %v", newExpiry, expiry)
	}
	// The old token expires; the session goes on.
	for time.Now().Before(expiry) {
		time.Sleep(50 * time.Millisecond)
	}
	if r := c.mustRun("orgs", "list", "-o", "json"); jq(t, ".organizations | map(.name) | join(\",\")", r.stdout) != "refreshed" {
		t.Errorf("after the old token expired: %s", r)
	}
}

func TestServiceAccountGetsANewTokenForEachCommandAndStoresNothing(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st, "ORGCTL_CLIENT_ID=svc-admin", "ORGCTL_CLIENT_SECRET=dev-secret")
	c.mustRun("orgs", "create", "pipeline-org", "--billing-email", "ops@example.com")
	c.mustRun("orgs", "list")
	if n := st.tokenRequests("client_credentials"); n != 2 {
		t.Errorf("%d client-credentials token requests for 2 commands, want 2", n)
	}
	if _, err := os.Stat(filepath.Join(c.configDir, "orgctl", "tokens")); !os.IsNotExist(err) {
		t.Errorf("a service account's run stored tokens (%v)", err)
	}
	if r := c.mustRun("whoami"); !strings.Contains(r.stdout, "service account") {
		t.Errorf("whoami: %s", r)
	}
	// The secret as a flag works too; a wrong one is an authentication failure.
	bad := newCLI(t, st)
	r := bad.run("orgs", "list", "--client-id", "svc-viewer", "--client-secret", "wrong")
	if r.code != 3 || !strings.Contains(r.stderr, "unauthorized_client") || !strings.Contains(r.stderr, "svc-viewer") {
		t.Errorf("wrong secret: %s\nwant exit 3 naming unauthorized_client and the client", r)
	}
	if r := bad.run("login", "--client-id", "svc-viewer", "--client-secret", "dev-secret"); r.code != 2 {
		t.Errorf("login as a service account: %s\nwant exit 2", r)
	}
}

// replaceAccessToken writes token into the context's stored session in
// place of the access token login got, leaving its expiry alone.
func replaceAccessToken(t *testing.T, c *cli, context, token string, refresh ...string) {
	t.Helper()
	sess, _ := storedSession(t, c, context)
	sess["accessToken"] = token
	if len(refresh) > 0 {
		sess["refreshToken"] = refresh[0]
	}
	data, err := json.Marshal(sess)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.configDir, "orgctl", "tokens", context+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokenTheEdgeRefusesBeforeItsExpiryIsRefreshedOnceBeforeAskingToLogIn(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	// A token as the edge sees one signed before a key rotation: the right
	// issuer, audience and person, a key the issuer no longer publishes.
	// (The development issuer signs its refresh tokens with its access
	// tokens' keys, so it cannot retire one without them.)
	rotated, err := devissuer.New(st.issuerBase, devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	oldKeyToken := func(user string) string {
		t.Helper()
		tok, err := rotated.TokenFor(user)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	alice := newCLI(t, st)
	alice.login("alice", "alice")
	replaceAccessToken(t, alice, "dev", oldKeyToken("alice"))
	r := alice.mustRun("orgs", "create", "acme", "--billing-email", "billing@acme.example", "-o", "json")
	if jq(t, ".name", r.stdout) != "acme" || r.stderr != "" {
		t.Errorf("after the refusal: %s", r)
	}
	if n := st.tokenRequests("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if sess, _ := storedSession(t, alice, "dev"); sess["accessToken"] == oldKeyToken("alice") {
		t.Error("the refreshed token was not stored")
	}

	// When the refresh fails too, once, the person is told to log in.
	carol := newCLI(t, st)
	carol.login("carol", "carol")
	replaceAccessToken(t, carol, "dev", oldKeyToken("carol"), "revoked")
	r = carol.run("orgs", "list")
	if r.code != 3 || !strings.Contains(r.stderr, "orgctl login") {
		t.Errorf("refresh refused too: %s\nwant exit 3 telling to log in", r)
	}
	if n := st.tokenRequests("refresh_token"); n != 2 {
		t.Errorf("%d refreshes in all, want 2: one for each person", n)
	}
}

func TestWrongIssuerURLNamesTheDiscoveryURLTriedAndWhatARightOneLooksLike(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	localhost := strings.Replace(st.issuerURL, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		name, issuer string
		args         []string
		want         []string
	}{
		{"without the realm", st.issuerBase, []string{"login"},
			[]string{st.issuerBase + "/.well-known/openid-configuration", "404"}},
		{"the API's URL", st.edge.URL, []string{"login"},
			[]string{st.edge.URL + "/.well-known/openid-configuration"}},
		{"the discovery document's URL", st.issuerURL + "/.well-known/openid-configuration", []string{"orgs", "list", "--client-id", "svc-admin", "--client-secret", "dev-secret"},
			[]string{"the issuer URL is " + st.issuerURL + "."}},
		{"another name of the host", localhost, []string{"orgs", "list", "--client-id", "svc-admin", "--client-secret", "dev-secret"},
			[]string{localhost + "/.well-known/openid-configuration", "must be exactly " + st.issuerURL}},
	} {
		c := newCLI(t, st, "ORGCTL_ISSUER="+tc.issuer)
		r := c.run(tc.args...)
		want := append(tc.want, "/realms/REALM", "https://id.example.com/realms/prod", "<issuer URL>/.well-known/openid-configuration")
		for _, w := range want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q", tc.name, w)
			}
		}
		if r.code != 2 || !strings.HasPrefix(r.stderr, "orgctl: OIDC discovery: ") {
			t.Errorf("%s: %s\nwant exit 2 (a configuration error)", tc.name, r)
		}
	}
}
