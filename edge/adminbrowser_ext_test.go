package edge_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
)

// browserPost sends what a browser sends for a page's fetch() or form
// POST: its headers as given, a body, no token.
func browserPost(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	r, _ := http.NewRequest("POST", url, strings.NewReader("x"))
	for k, v := range header {
		r.Header[k] = v
	}
	if host := header.Get("Host"); host != "" {
		r.Host = host
	}
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestNoWebPageCanResetLimitsThroughTheLoopbackAdminAPI(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 1, Burst: 1, RequestsPerDay: 100}}
	})
	tok := s.token("free-browser-victim")
	sub := subjectOf(t, tok)
	reset := s.edge.AdminURL + "/admin/v1/subjects/" + url.PathEscape(sub) + "/reset-limits"
	port := s.edge.AdminURL[strings.LastIndexByte(s.edge.AdminURL, ':')+1:]
	jsonCall(t, s.edge.URL, tok, listOrgs, "{}")

	for _, tt := range []struct {
		name   string
		header http.Header
		want   int
	}{
		// fetch(url, {method: "POST", mode: "no-cors", body: "x"}) from
		// any site: a simple request, sent without a preflight.
		{"cross-site text/plain POST", http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain;charset=UTF-8"},
			"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"no-cors"}}, http.StatusForbidden},
		// <form method=post enctype=text/plain> from a sandboxed page.
		{"form POST from an opaque origin", http.Header{"Origin": {"null"}, "Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusForbidden},
		// A page whose name was rebound to 127.0.0.1: same-origin, so
		// its JSON POST needs no preflight; the browser still says Origin.
		{"DNS-rebound JSON POST", http.Header{"Host": {"rebind.evil.example:" + port}, "Origin": {"http://rebind.evil.example:" + port},
			"Content-Type": {"application/json"}}, http.StatusForbidden},
		// The same name without Origin (a client that drops it).
		{"DNS-rebound Host", http.Header{"Host": {"rebind.evil.example:" + port}, "Content-Type": {"application/json"}}, http.StatusForbidden},
		// A simple request without Origin (an old browser, a plugin).
		{"text/plain POST", http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType},
	} {
		if code, body := browserPost(t, reset, tt.header); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
		if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("after %s: the subject's call got %d, want 429: its limits were reset", tt.name, res.StatusCode)
		}
	}
	// Inspecting a customer through a rebound name is refused too.
	r, _ := http.NewRequest("GET", s.edge.AdminURL+"/admin/v1/subjects/"+url.PathEscape(sub), nil)
	r.Host = "rebind.evil.example:" + port
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("inspect through a rebound name: %d, want 403", res.StatusCode)
	}

	// The operator's curl, as docs/operations.md prints it, still works,
	// through 127.0.0.1 and through localhost.
	for _, host := range []string{"", "localhost:" + port} {
		if code, body := browserPost(t, reset, http.Header{"Content-Type": {"application/json"}, "Host": {host}}); code != http.StatusOK {
			t.Fatalf("curl with Host %q: %d %s", host, code, body)
		}
	}
	if res, _ := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Errorf("after the operator's reset: %d, want 200", res.StatusCode)
	}
	if refused := strings.Count(s.log.String(), `"msg":"admin action refused"`); refused != 6 {
		t.Errorf("%d refusals audited, want 6:\n%s", refused, s.log.String())
	}
}

func TestProfilesOffLoopbackNeedTheOperatorToken(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.Admin.Addr, c.Admin.Pprof = "0.0.0.0:0", true
		c.OIDC.FailureLimit = config.FailureLimit{PerMinute: 1, Burst: 2}
	})
	adminURL := strings.Replace(s.edge.AdminURL, "[::]", "127.0.0.1", 1)
	for _, tt := range []struct {
		who  string
		want int
	}{{"", http.StatusUnauthorized}, {"svc-viewer", http.StatusForbidden}, {"svc-admin", http.StatusOK}} {
		tok := ""
		if tt.who != "" {
			tok = s.token(tt.who)
		}
		if code, body := adminCall(t, "GET", adminURL, "/debug/pprof/cmdline", tok); code != tt.want {
			t.Errorf("profile with %q: %d %s, want %d", tt.who, code, clip(body), tt.want)
		}
	}

	// The per-address bound on failed authentications holds here as on
	// the API: after its burst of forged tokens, an address gets 429
	// without its next token being verified.
	real := s.token("svc-admin")
	forged := real[:strings.LastIndexByte(real, '.')+1] + "Zm9yZ2Vk"
	codes := []int{}
	for range 3 {
		code, _ := adminCall(t, "GET", adminURL, "/admin/v1/subjects/someone", forged)
		codes = append(codes, code)
	}
	if codes[0] != http.StatusUnauthorized || codes[1] != http.StatusUnauthorized || codes[2] != http.StatusTooManyRequests {
		t.Errorf("forged tokens got %v, want [401 401 429]", codes)
	}
}
