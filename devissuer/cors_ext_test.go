package devissuer_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/orgedge/edge/devissuer"
)

// TestAnyOriginMayFetchATokenWhenAllowed: with AllowAnyOrigin (the
// development mode), a page on another origin reads the token endpoint's
// answer and the discovery document; without it, it gets no CORS header.
func TestAnyOriginMayFetchATokenWhenAllowed(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		cfg := devissuer.DefaultConfig()
		cfg.AllowAnyOrigin = allow
		iss := startIssuer(t, cfg)
		want := ""
		if allow {
			want = "*"
		}
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc-viewer"}, "client_secret": {"dev-secret"}}
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, iss.URL()+"/protocol/openid-connect/token", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://127.0.0.2:3000")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != want {
			t.Errorf("AllowAnyOrigin %v: token endpoint %d, Allow-Origin %q; want 200, %q", allow, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"), want)
		}
		r, _ = http.NewRequestWithContext(t.Context(), http.MethodOptions, iss.URL()+"/.well-known/openid-configuration", nil)
		r.Header.Set("Origin", "http://127.0.0.2:3000")
		r.Header.Set("Access-Control-Request-Method", "GET")
		res, err = http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != want {
			t.Errorf("AllowAnyOrigin %v: discovery preflight Allow-Origin %q, want %q", allow, got, want)
		}
	}
}
