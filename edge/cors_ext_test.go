package edge_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// chromiumRequestHeaders is what Chromium sends in
// Access-Control-Request-Headers before a connect-web call with a token, an
// Idempotency-Key and a trace context: lower case, sorted.
const chromiumRequestHeaders = "authorization,connect-protocol-version,content-type,idempotency-key,traceparent,x-grpc-web,x-user-agent"

// preflight sends the OPTIONS request a browser sends before a
// cross-origin call: no token, no body.
func preflight(t *testing.T, base, procedure, origin string) *http.Response {
	t.Helper()
	r, _ := http.NewRequestWithContext(ctxT(t), http.MethodOptions, base+procedure, nil)
	r.Header.Set("Origin", origin)
	r.Header.Set("Access-Control-Request-Method", "POST")
	r.Header.Set("Access-Control-Request-Headers", chromiumRequestHeaders)
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res
}

// originTransport sends Origin with every request, as a browser does on a
// cross-origin call, and keeps the last answer's headers.
type originTransport struct {
	origin string
	last   http.Header
}

func (o *originTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Origin", o.origin)
	res, err := testkit.HTTP1Client.Transport.RoundTrip(r)
	if err == nil {
		o.last = res.Header
	}
	return res, err
}

// exposed is the answer's Access-Control-Expose-Headers, canonical.
func exposed(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Access-Control-Expose-Headers") {
		for f := range strings.SplitSeq(v, ",") {
			out = append(out, http.CanonicalHeaderKey(strings.TrimSpace(f)))
		}
	}
	return out
}

// TestBrowsersOnAllowedOriginsPreflightAndReadEveryAnswerOthersGetNoCORS:
// a page on an allowed origin (exact, or matching https://*.example.com)
// gets its preflight answered by the edge without a token, and every
// answer, the edge's own 401 included, names its origin and exposes the
// headers its client reads; another origin gets no CORS header at all.
// Before CORS, the preflight was 405 and no answer had any of these.
func TestBrowsersOnAllowedOriginsPreflightAndReadEveryAnswerOthersGetNoCORS(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.CORS.AllowedOrigins = []string{"http://127.0.0.2:3000", "https://*.example.com"}
	})
	base := s.edge.URL
	const proc = "/svc.v1.OrganizationService/ListOrganizations"

	for _, origin := range []string{"http://127.0.0.2:3000", "https://console.example.com"} {
		res := preflight(t, base, proc, origin)
		if res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("preflight from %s: %d, Allow-Origin %q; want 2xx naming the origin", origin, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
		allowed := strings.ToLower(strings.Join(res.Header.Values("Access-Control-Allow-Headers"), ","))
		for h := range strings.SplitSeq(chromiumRequestHeaders, ",") {
			if !strings.Contains(allowed, h) {
				t.Errorf("preflight from %s: Allow-Headers %q lacks %s", origin, allowed, h)
			}
		}
		if got := res.Header.Get("Access-Control-Max-Age"); got != "7200" {
			t.Errorf("preflight Max-Age %q, want 7200 (the default 2h)", got)
		}
		if got := res.Header.Get("Access-Control-Allow-Credentials"); got != "" {
			t.Errorf("preflight Allow-Credentials %q, want none (off unless set)", got)
		}
	}
	for _, origin := range []string{"https://evil.test", "https://example.com", "http://console.example.com"} {
		res := preflight(t, base, proc, origin)
		if h := res.Header.Get("Access-Control-Allow-Origin"); h != "" {
			t.Errorf("preflight from unknown %s got Allow-Origin %q", origin, h)
		}
	}

	wantExposed := []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "X-Ratelimit-Limit", "X-Ratelimit-Remaining",
		"X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy", "Retry-After", "Idempotent-Replayed", "X-Request-Id"}
	readable := func(what string, h http.Header, origin string) {
		t.Helper()
		if got := h.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("%s: Allow-Origin %q, want %q", what, got, origin)
		}
		for _, w := range wantExposed {
			if !slices.Contains(exposed(h), w) {
				t.Errorf("%s: Expose-Headers %v lacks %s", what, exposed(h), w)
			}
		}
		if !slices.Contains(h.Values("Vary"), "Origin") {
			t.Errorf("%s: Vary %q lacks Origin", what, h.Values("Vary"))
		}
	}
	const origin = "https://console.example.com"
	for _, p := range []testkit.Protocol{testkit.ConnectProto, testkit.GRPCWeb} {
		tr := &originTransport{origin: origin}
		hc := &http.Client{Transport: tr}
		// The edge's own refusal: no token.
		_, err := testkit.NewClientsWith(hc, base, p, "").Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s without a token: %v", p, err)
		}
		readable(string(p)+" 401", tr.last, origin)
		res, err := testkit.NewClientsWith(hc, base, p, token("pro-cors")).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		readable(string(p)+" answer", res.Header(), origin)

		other := &originTransport{origin: "https://evil.test"}
		if _, err := testkit.NewClientsWith(&http.Client{Transport: other}, base, p, token("pro-cors")).Org.ListOrganizations(ctxT(t),
			req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatal(err)
		}
		for k := range other.last {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s answer to an unknown origin has %s", p, k)
			}
		}
	}
}

// TestPreflightsAreBoundedPerAddressAndCORSReloads: preflights take from a
// bucket per client address (here 2, then 429 with Retry-After), and a
// reload of the file changes the allowed origins for the next request.
func TestPreflightsAreBoundedPerAddressAndCORSReloads(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) {
		c.CORS.AllowedOrigins = []string{"https://a.example"}
		c.CORS.PreflightLimit = config.PreflightLimit{PerMinute: 1, Burst: 2}
	})
	base := s.edge.URL
	const proc = "/svc.v1.OrganizationService/ListOrganizations"
	for i := range 2 {
		if res := preflight(t, base, proc, "https://a.example"); res.StatusCode/100 != 2 {
			t.Fatalf("preflight %d: %d", i+1, res.StatusCode)
		}
	}
	res := preflight(t, base, proc, "https://a.example")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third preflight: %d, want 429", res.StatusCode)
	}
	if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After %q, want 1..60 seconds", res.Header.Get("Retry-After"))
	}

	cfg := s.edge.Config
	cfg.CORS.AllowedOrigins = []string{"https://b.example"}
	cfg.CORS.PreflightLimit = config.PreflightLimit{} // off
	writeConfig(t, s.path, cfg)
	if err := s.edge.App.Reload(ctxT(t), s.path); err != nil {
		t.Fatal(err)
	}
	if res := preflight(t, base, proc, "https://b.example"); res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != "https://b.example" {
		t.Fatalf("after the reload, preflight from the new origin: %d %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
	}
	if res := preflight(t, base, proc, "https://a.example"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("after the reload, the old origin is still allowed")
	}
}

// TestPreflightWithRequestHeadersInAnyOrderAndCaseIsAllowed: a preflight
// as Chromium sends it (its Sec-Fetch-*, Accept and Referer), but whose
// Access-Control-Request-Headers lists the headers in mixed order and
// case, with spaces, a repeat and over two lines, as a client other than
// today's browsers or a proxy that rewrites it may, is allowed and names
// every header it asked for; a header the edge does not allow is still
// refused, whatever its case. Before, only a sorted, lower-case list was
// allowed (rs/cors accepts no other).
func TestPreflightWithRequestHeadersInAnyOrderAndCaseIsAllowed(t *testing.T) {
	t.Parallel()
	const origin = "https://console.example.com"
	s, _ := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.CORS.AllowedOrigins = []string{origin} })
	send := func(requestHeaders ...string) *http.Response {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctxT(t), http.MethodOptions, s.edge.URL+"/svc.v1.OrganizationService/ListOrganizations", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		for _, h := range requestHeaders {
			r.Header.Add("Access-Control-Request-Headers", h)
		}
		r.Header.Set("Accept", "*/*")
		r.Header.Set("Sec-Fetch-Mode", "cors")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Sec-Fetch-Dest", "empty")
		r.Header.Set("Referer", origin+"/")
		r.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")
		res, err := testkit.HTTP1Client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res
	}
	for _, headers := range [][]string{
		{"Content-Type, Authorization,X-Grpc-Web, connect-protocol-version , Idempotency-Key,TRACEPARENT,x-user-agent"},
		{"x-user-agent,traceparent,idempotency-key,content-type", "Connect-Protocol-Version,authorization,Authorization,X-GRPC-WEB"},
	} {
		res := send(headers...)
		if res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("preflight with Access-Control-Request-Headers %q: %d, Allow-Origin %q; want 2xx naming the origin",
				headers, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
			continue
		}
		allowed := strings.Split(strings.ToLower(strings.Join(res.Header.Values("Access-Control-Allow-Headers"), ",")), ",")
		for h := range strings.SplitSeq(chromiumRequestHeaders, ",") {
			if !slices.Contains(allowed, h) {
				t.Errorf("preflight with %q: Allow-Headers %q lacks %s", headers, allowed, h)
			}
		}
	}
	if res := send("Authorization, X-Not-Allowed, Content-Type"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight asking for X-Not-Allowed: Allow-Origin %q, want none (refused)", res.Header.Get("Access-Control-Allow-Origin"))
	}
}
