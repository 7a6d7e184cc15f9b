package cors_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/cors"
)

const (
	page    = "https://app.example.com"
	methodA = "/org.v1.OrganizationService/ListEnvironments"
)

// next stands for the rest of the chain: it records whether it was called
// and answers 200 with a header of its own.
type next struct{ calls int }

func (n *next) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n.calls++
	w.Header().Set("Grpc-Status", "0")
	w.WriteHeader(http.StatusOK)
}

func allowing(origins ...string) config.CORS {
	return config.CORS{AllowedOrigins: origins, MaxAge: 2 * time.Hour}
}

func preflight(origin, method string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodOptions, methodA, nil)
	r.Header.Set("Origin", origin)
	r.Header.Set("Access-Control-Request-Method", method)
	for _, h := range headers {
		r.Header.Add("Access-Control-Request-Headers", h)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *http.Response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestAPreflightFromAnAllowedOriginIsAnsweredHereAndNotForwarded(t *testing.T) {
	n := &next{}
	h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(n)
	res := serve(h, preflight(page, http.MethodPost, "content-type,connect-protocol-version,authorization"))
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", res.StatusCode)
	}
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != page {
		t.Errorf("Access-Control-Allow-Origin %q, want %q", got, page)
	}
	if got := res.Header.Get("Access-Control-Allow-Methods"); got != http.MethodPost {
		t.Errorf("Access-Control-Allow-Methods %q, want POST", got)
	}
	if got := res.Header.Get("Access-Control-Max-Age"); got != "7200" {
		t.Errorf("Access-Control-Max-Age %q, want 7200 (2h)", got)
	}
	if got := res.Header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("Access-Control-Allow-Credentials %q without allow_credentials", got)
	}
	if n.calls != 0 {
		t.Errorf("the preflight reached the next step %d times: it must be answered here", n.calls)
	}
}

func TestAPreflightFromAnotherOriginGetsNoAllowOrigin(t *testing.T) {
	for _, origin := range []string{"https://evil.example.net", "http://app.example.com", "https://app.example.com:8443"} {
		t.Run(origin, func(t *testing.T) {
			n := &next{}
			h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(n)
			res := serve(h, preflight(origin, http.MethodPost, "content-type"))
			if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("Access-Control-Allow-Origin %q for an origin not allowed", got)
			}
			if n.calls != 0 {
				t.Errorf("a refused preflight reached the next step")
			}
		})
	}
}

func TestAPatternOriginAllowsSubdomainsOnly(t *testing.T) {
	h := cors.New(allowing("https://*.example.com"), authn.ClientAddress{}).Wrap(&next{})
	for origin, allowed := range map[string]bool{
		"https://app.example.com":   true,
		"https://a.b.example.com":   true,
		"https://example.com":       false,
		"https://app.example.com.x": false,
	} {
		res := serve(h, preflight(origin, http.MethodPost, "content-type"))
		if got := res.Header.Get("Access-Control-Allow-Origin") == origin; got != allowed {
			t.Errorf("%s: allowed %v, want %v", origin, got, allowed)
		}
	}
}

func TestAPreflightListingItsHeadersInAnyOrderAndCaseIsAllowed(t *testing.T) {
	h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(&next{})
	for name, headers := range map[string][]string{
		"sorted lower case (browsers)": {"authorization,connect-protocol-version,content-type,idempotency-key"},
		"unsorted":                     {"idempotency-key,content-type,authorization,connect-protocol-version"},
		"mixed case with spaces":       {"Content-Type, Authorization ,\tIdempotency-Key, Connect-Protocol-Version"},
		"repeats":                      {"content-type,Content-Type,authorization,AUTHORIZATION"},
		"over several lines":           {"Content-Type", "Authorization", "X-Grpc-Web, X-User-Agent"},
		"empty entries":                {"content-type,,authorization,"},
	} {
		t.Run(name, func(t *testing.T) {
			res := serve(h, preflight(page, http.MethodPost, headers...))
			if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != page {
				t.Fatalf("status %d, Access-Control-Allow-Origin %q; want 204 allowing %s",
					res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"), page)
			}
			allowed := strings.ToLower(strings.Join(res.Header.Values("Access-Control-Allow-Headers"), ","))
			for _, line := range headers {
				for name := range strings.SplitSeq(line, ",") {
					if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !strings.Contains(allowed, name) {
						t.Errorf("Access-Control-Allow-Headers %q lacks %q", allowed, name)
					}
				}
			}
		})
	}
}

func TestAPreflightAskingForAHeaderNotAllowedIsRefused(t *testing.T) {
	h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(&next{})
	for _, headers := range []string{"content-type,x-secret", "X-Secret, Content-Type", "cookie"} {
		res := serve(h, preflight(page, http.MethodPost, headers))
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%q: Access-Control-Allow-Origin %q, want none", headers, got)
		}
	}
}

func TestAPreflightForAMethodNotAllowedIsRefused(t *testing.T) {
	h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(&next{})
	res := serve(h, preflight(page, http.MethodDelete))
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("DELETE: Access-Control-Allow-Origin %q, want none", got)
	}
}

func TestAnAnswerToAnAllowedOriginCarriesTheHeadersAPageMayRead(t *testing.T) {
	n := &next{}
	h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(n)
	r := httptest.NewRequest(http.MethodPost, methodA, strings.NewReader("{}"))
	r.Header.Set("Origin", page)
	res := serve(h, r)
	if n.calls != 1 || res.StatusCode != http.StatusOK {
		t.Fatalf("next called %d times, status %d; want the call forwarded once", n.calls, res.StatusCode)
	}
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != page {
		t.Errorf("Access-Control-Allow-Origin %q, want %q", got, page)
	}
	exposed := strings.ToLower(strings.Join(res.Header.Values("Access-Control-Expose-Headers"), ","))
	for _, want := range []string{"grpc-status", "grpc-message", "retry-after", "x-ratelimit-remaining", "ratelimit", "idempotent-replayed", "x-request-id", "www-authenticate"} {
		if !strings.Contains(exposed, want) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, want)
		}
	}
	if !strings.Contains(strings.Join(res.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("Vary %q lacks Origin: a cache would give one origin's answer to another", res.Header.Values("Vary"))
	}
}

func TestAnAnswerToAnotherOriginOrNoneIsForwardedWithoutCORSHeaders(t *testing.T) {
	for _, origin := range []string{"https://evil.example.net", ""} {
		n := &next{}
		h := cors.New(allowing(page), authn.ClientAddress{}).Wrap(n)
		r := httptest.NewRequest(http.MethodPost, methodA, strings.NewReader("{}"))
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		res := serve(h, r)
		if n.calls != 1 {
			t.Errorf("origin %q: next called %d times, want 1 (CORS does not decide who may call)", origin, n.calls)
		}
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("origin %q: Access-Control-Allow-Origin %q, want none", origin, got)
		}
	}
}

func TestWithoutAllowedOriginsEveryRequestGoesOnUntouched(t *testing.T) {
	n := &next{}
	h := cors.New(config.CORS{PreflightLimit: config.PreflightLimit{PerMinute: 1, Burst: 1}}, authn.ClientAddress{}).Wrap(n)
	for range 3 {
		res := serve(h, preflight(page, http.MethodPost, "content-type"))
		if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("status %d, Access-Control-Allow-Origin %q; want the next step's 200 and no CORS",
				res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if n.calls != 3 {
		t.Fatalf("next called %d times, want 3: without CORS an OPTIONS is the backend's to answer", n.calls)
	}
}

func TestAllowCredentialsIsSaidOnlyWhenConfigured(t *testing.T) {
	c := allowing(page)
	c.AllowCredentials = true
	h := cors.New(c, authn.ClientAddress{}).Wrap(&next{})
	res := serve(h, preflight(page, http.MethodPost, "content-type"))
	if got := res.Header.Get("Access-Control-Allow-Credentials"); got != "true" {
		t.Fatalf("Access-Control-Allow-Credentials %q, want true", got)
	}
}

func from(r *http.Request, addr string) *http.Request {
	r.RemoteAddr = addr
	return r
}

func TestPreflightsPastTheirAddresssBurstAreRefusedWithRetryAfter(t *testing.T) {
	c := allowing(page)
	c.PreflightLimit = config.PreflightLimit{PerMinute: 1, Burst: 3}
	n := &next{}
	h := cors.New(c, authn.ClientAddress{}).Wrap(n)
	for i := range 3 {
		if res := serve(h, from(preflight(page, http.MethodPost), "192.0.2.7:1000")); res.StatusCode != http.StatusNoContent {
			t.Fatalf("preflight %d within the burst: status %d, want 204", i+1, res.StatusCode)
		}
	}
	res := serve(h, from(preflight(page, http.MethodPost), "192.0.2.7:1001"))
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th preflight from the same address: status %d, want 429", res.StatusCode)
	}
	if ra := res.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q, want the seconds until a token (1 a minute)", ra)
	}
	if res := serve(h, from(preflight(page, http.MethodPost), "192.0.2.8:1000")); res.StatusCode != http.StatusNoContent {
		t.Errorf("another address: status %d, want 204 (the bound is per address)", res.StatusCode)
	}
	r := from(httptest.NewRequest(http.MethodPost, methodA, nil), "192.0.2.7:1002")
	r.Header.Set("Origin", page)
	if res := serve(h, r); res.StatusCode != http.StatusOK {
		t.Errorf("a call (not a preflight) from the bounded address: status %d, want it forwarded", res.StatusCode)
	}
	if n.calls != 1 {
		t.Errorf("next called %d times, want once (the call, never a preflight)", n.calls)
	}
}

func TestPreflightsFromATrustedProxyCountByTheAddressItNames(t *testing.T) {
	c := allowing(page)
	c.PreflightLimit = config.PreflightLimit{PerMinute: 1, Burst: 1}
	addr := authn.ClientAddress{Header: "X-Forwarded-For", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	h := cors.New(c, addr).Wrap(&next{})
	viaProxy := func(client string) *http.Response {
		r := from(preflight(page, http.MethodPost), "10.1.2.3:5000")
		r.Header.Set("X-Forwarded-For", client)
		return serve(h, r)
	}
	if res := viaProxy("198.51.100.1"); res.StatusCode != http.StatusNoContent {
		t.Fatalf("first client's preflight: status %d", res.StatusCode)
	}
	if res := viaProxy("198.51.100.2"); res.StatusCode != http.StatusNoContent {
		t.Fatalf("second client behind the same proxy: status %d, want 204 (bounded by its own address)", res.StatusCode)
	}
	if res := viaProxy("198.51.100.1"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first client's second preflight: status %d, want 429", res.StatusCode)
	}
}

func TestSetSwapsTheOriginsAndKeepsTheBucketsOfAnUnchangedBound(t *testing.T) {
	c := allowing(page)
	c.PreflightLimit = config.PreflightLimit{PerMinute: 1, Burst: 1}
	s := cors.New(c, authn.ClientAddress{})
	h := s.Wrap(&next{})
	const client = "192.0.2.9:1"
	if res := serve(h, from(preflight(page, http.MethodPost), client)); res.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", res.StatusCode)
	}

	const other = "https://other.example.org"
	c2 := allowing(other)
	c2.PreflightLimit = c.PreflightLimit
	s.Set(c2)
	if res := serve(h, from(preflight(other, http.MethodPost), "192.0.2.10:1")); res.Header.Get("Access-Control-Allow-Origin") != other {
		t.Errorf("after Set: the new origin is not allowed (Access-Control-Allow-Origin %q)", res.Header.Get("Access-Control-Allow-Origin"))
	}
	if res := serve(h, from(preflight(page, http.MethodPost), "192.0.2.11:1")); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("after Set: the old origin is still allowed")
	}
	if res := serve(h, from(preflight(other, http.MethodPost), client)); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after a reload with the same bound: status %d, want 429 (the address's empty bucket kept)", res.StatusCode)
	}

	c3 := c2
	c3.PreflightLimit = config.PreflightLimit{PerMinute: 1, Burst: 2}
	s.Set(c3)
	if res := serve(h, from(preflight(other, http.MethodPost), client)); res.StatusCode != http.StatusNoContent {
		t.Errorf("after a reload with a new bound: status %d, want 204 (new buckets)", res.StatusCode)
	}
}
