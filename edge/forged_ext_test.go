package edge_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// countingIssuer is the development issuer on a real socket, counting the
// requests for its JWKS.
type countingIssuer struct {
	*devissuer.Issuer
	jwksFetches atomic.Int64
}

func startCountingIssuer(t *testing.T) *countingIssuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New("http://"+ln.Addr().String(), devissuer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingIssuer{Issuer: iss}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/protocol/openid-connect/certs") {
			c.jwksFetches.Add(1)
		}
		iss.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

// forge returns a token that looks like the issuer's for username but whose
// signature is random bytes, naming key id kid ("" for none).
func forge(t *testing.T, iss *devissuer.Issuer, username, kid string) string {
	t.Helper()
	claims, err := iss.ClaimsFor(username)
	if err != nil {
		t.Fatal(err)
	}
	header := map[string]string{"alg": "RS256", "typ": "JWT"}
	if kid != "" {
		header["kid"] = kid
	}
	seg := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	sig := make([]byte, 256)
	_, _ = rand.Read(sig)
	return seg(header) + "." + seg(claims) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// startForgeryStack runs a backend and an edge verifying tokens from iss.
func startForgeryStack(t *testing.T, iss *countingIssuer, change func(*config.Config)) *testkit.Edge {
	t.Helper()
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	if change != nil {
		change(cfg)
	}
	return testkit.StartEdge(t, cfg)
}

func listOrgsWith(t *testing.T, edgeURL string, p testkit.Protocol, tok string) error {
	_, err := testkit.NewClients(edgeURL, p, tok).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
	return err
}

// A thousand forged tokens (random signatures under the issuer's own key id,
// under unknown key ids, and under none) through the real edge cost the
// identity provider at most one JWKS fetch beyond the first.
func TestThousandForgedTokensFetchTheIssuersKeysAtMostOnceMore(t *testing.T) {
	t.Parallel()
	iss := startCountingIssuer(t)
	e := startForgeryStack(t, iss, func(c *config.Config) {
		c.OIDC.KeyRefetchInterval = time.Minute
		c.OIDC.FailureLimit.PerMinute = 0 // every forged token reaches the verifier
	})
	good, err := iss.TokenFor("bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := listOrgsWith(t, e.URL, testkit.GRPC, good); err != nil {
		t.Fatal(err)
	}
	before := iss.jwksFetches.Load() // the edge's first fetch, and the backend's
	var g errgroup.Group
	g.SetLimit(8)
	var unauthenticated atomic.Int64
	for i := range 1000 {
		kid := iss.KeyID()
		switch i % 3 {
		case 1:
			kid = fmt.Sprintf("kid-%d", i)
		case 2:
			kid = ""
		}
		tok := forge(t, iss.Issuer, "service-account-svc-admin", kid)
		p := testkit.GRPC
		if i%2 == 1 {
			p = testkit.HTTPJSON
		}
		g.Go(func() error {
			err := listOrgsWith(t, e.URL, p, tok)
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				return fmt.Errorf("forged token %d over %s: %v, want unauthenticated", i, p, err)
			}
			unauthenticated.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d forged tokens, %d JWKS fetches before them, %d during", unauthenticated.Load(), before, iss.jwksFetches.Load()-before)
	if got := iss.jwksFetches.Load() - before; got > 1 {
		t.Fatalf("%d forged tokens made %d JWKS fetches, want at most 1", unauthenticated.Load(), got)
	}
	if err := listOrgsWith(t, e.URL, testkit.HTTPJSON, good); err != nil {
		t.Fatalf("the real token after the forgeries: %v", err)
	}
	if n := testkit.Scrape(t, e.AdminURL+"/metrics").Sum("edge_oidc_key_fetches_total"); n < 1 || n > 2 {
		t.Errorf("edge_oidc_key_fetches_total %v, want 1 or 2", n)
	}
}

// A refused token sent again is refused without another verification.
func TestRefusedTokenIsRefusedAgainWithoutVerifying(t *testing.T) {
	t.Parallel()
	iss := startCountingIssuer(t)
	e := startForgeryStack(t, iss, func(c *config.Config) { c.OIDC.FailureLimit.PerMinute = 0 })
	forged := forge(t, iss.Issuer, "alice", iss.KeyID())
	for range 50 {
		err := listOrgsWith(t, e.URL, testkit.ConnectProto, forged)
		wantError(t, err, connect.CodeUnauthenticated, "TOKEN_INVALID", "edge")
	}
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if v, r := m.Sum("edge_token_verifications_total"), m.Sum("edge_token_refusals_remembered_total"); v != 1 || r != 49 {
		t.Fatalf("verifications %v, remembered refusals %v; want 1 and 49", v, r)
	}
}

// A client address that keeps failing gets resource_exhausted, with
// Retry-After, in its own protocol, before any verification; tokens verified
// before keep working from the same address.
func TestClientAddressThatKeepsFailingIsRefusedBeforeVerification(t *testing.T) {
	t.Parallel()
	iss := startCountingIssuer(t)
	e := startForgeryStack(t, iss, func(c *config.Config) {
		c.OIDC.FailureLimit = config.FailureLimit{PerMinute: 1, Burst: 5}
	})
	known, _ := iss.TokenFor("bob")
	if err := listOrgsWith(t, e.URL, testkit.GRPC, known); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		err := listOrgsWith(t, e.URL, testkit.GRPC, forge(t, iss.Issuer, "alice", iss.KeyID()))
		wantError(t, err, connect.CodeUnauthenticated, "TOKEN_INVALID", "edge")
	}
	for _, p := range []testkit.Protocol{testkit.GRPC, testkit.HTTPJSON, testkit.ConnectJSON, testkit.GRPCWeb} {
		err := listOrgsWith(t, e.URL, p, forge(t, iss.Issuer, "alice", iss.KeyID()))
		wantError(t, err, connect.CodeResourceExhausted, "TOO_MANY_AUTHENTICATION_FAILURES", "edge")
	}
	// The answer over HTTP/JSON: 429 with Retry-After.
	httpReq, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.URL+"/svc.v1.OrganizationService/ListOrganizations", strings.NewReader("{}"))
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Authorization", "Bearer "+forge(t, iss.Issuer, "alice", iss.KeyID()))
	res, err := testkit.HTTP1Client.Do(httpReq)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP %d Retry-After %q, want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// A real token never seen before waits too; the known one passes.
	fresh, _ := iss.TokenFor("carol")
	wantError(t, listOrgsWith(t, e.URL, testkit.GRPC, fresh), connect.CodeResourceExhausted, "TOO_MANY_AUTHENTICATION_FAILURES", "edge")
	if err := listOrgsWith(t, e.URL, testkit.HTTPJSON, known); err != nil {
		t.Fatalf("a token verified before: %v", err)
	}
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if v := m.Sum("edge_token_verifications_total"); v != 6 {
		t.Errorf("edge_token_verifications_total %v, want 6 (the known token and 5 forgeries)", v)
	}
}

// The client address comes from a header only when a trusted proxy sent it;
// then each client behind the proxy has its own bound.
func TestClientAddressHeaderIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	iss := startCountingIssuer(t)
	call := func(t *testing.T, e *testkit.Edge, forwardedFor string) error {
		c := &testkit.JSONClient{HTTP: testkit.HTTP1Client, BaseURL: e.URL, Header: http.Header{
			"Authorization":   {"Bearer " + forge(t, iss.Issuer, "alice", iss.KeyID())},
			"X-Forwarded-For": {forwardedFor},
		}}
		_, err := c.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		return err
	}
	limit := config.FailureLimit{PerMinute: 1, Burst: 2}
	t.Run("Untrusted", func(t *testing.T) {
		e := startForgeryStack(t, iss, func(c *config.Config) { c.OIDC.FailureLimit = limit })
		var codes []connect.Code
		for i := range 4 {
			codes = append(codes, connect.CodeOf(call(t, e, fmt.Sprintf("198.51.100.%d", i))))
		}
		if codes[2] != connect.CodeResourceExhausted || codes[3] != connect.CodeResourceExhausted {
			t.Fatalf("codes %v: a forged X-Forwarded-For escaped the bound", codes)
		}
	})
	t.Run("Trusted", func(t *testing.T) {
		e := startForgeryStack(t, iss, func(c *config.Config) {
			c.OIDC.FailureLimit = limit
			c.Listen.ClientAddress = config.ClientAddress{Header: "X-Forwarded-For", TrustedProxies: []string{"127.0.0.1"}}
		})
		codes := map[string][]connect.Code{}
		for _, client := range []string{"203.0.113.1", "203.0.113.1", "203.0.113.1", "spoofed, 203.0.113.2", "203.0.113.2"} {
			codes[client] = append(codes[client], connect.CodeOf(call(t, e, client)))
		}
		if c := codes["203.0.113.1"]; c[0] != connect.CodeUnauthenticated || c[2] != connect.CodeResourceExhausted {
			t.Errorf("first client: %v", c)
		}
		if c := append(codes["spoofed, 203.0.113.2"], codes["203.0.113.2"]...); c[0] != connect.CodeUnauthenticated || c[1] != connect.CodeUnauthenticated {
			t.Errorf("second client (the proxy's last entry): %v, want its own bound", c)
		}
	})
}
