package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/app"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// backend is a fake OrganizationService: it answers GetOrganization with
// the id asked for, and counts the calls that reach it and whether they
// carried the caller's token.
type backend struct {
	svcv1connect.UnimplementedOrganizationServiceHandler
	calls, withToken atomic.Int64
}

func (b *backend) GetOrganization(_ context.Context, r *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	b.calls.Add(1)
	if strings.HasPrefix(r.Header().Get("Authorization"), "Bearer ") {
		b.withToken.Add(1)
	}
	return connect.NewResponse(&svcv1.Organization{Id: r.Msg.GetOrganizationId(), Name: "Acme"}), nil
}

// startBackend serves b over HTTP/1.1 and cleartext HTTP/2, as the real
// backend does.
func startBackend(t *testing.T, b *backend) string {
	t.Helper()
	s := httptest.NewUnstartedServer(nil)
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewOrganizationServiceHandler(b))
	s.Config.Handler = mux
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s.URL
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start builds the edge from cfg with app.New, as cmd/edge does, and
// listens; the test shuts it down itself or at its end.
func start(t *testing.T, cfg *config.Config) *app.App {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	a, err := app.New(cfg, quiet(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
		a.Close()
	})
	return a
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func getOrganization(t *testing.T, a *app.App, p testkit.Protocol, token string) (*svcv1.Organization, error) {
	t.Helper()
	res, err := testkit.NewClients("http://"+a.APIAddr(), p, token).Org.
		GetOrganization(ctxT(t), connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: "org-1"}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, body := testkit.Do(t, testkit.HTTP1Client, req)
	return res.StatusCode, string(body)
}

func TestAnEdgeBuiltFromConfigServesCallsToItsBackendThenShutsDown(t *testing.T) {
	b := &backend{}
	issuer := testkit.SharedIssuer(t).URL()
	a := start(t, testkit.EdgeConfig(t, startBackend(t, b), issuer))
	token := testkit.Token(t, issuer, testenv.Unique("free-app"))

	for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.GRPC, testkit.GRPCWeb, testkit.HTTPJSON} {
		org, err := getOrganization(t, a, p, token)
		if err != nil || org.GetId() != "org-1" || org.GetName() != "Acme" {
			t.Fatalf("%s: GetOrganization through the edge: %v, %v; want the backend's Acme", p, org, err)
		}
	}
	if b.calls.Load() != 4 || b.withToken.Load() != 4 {
		t.Fatalf("the backend got %d calls (%d with the token), want 4, each with it", b.calls.Load(), b.withToken.Load())
	}

	// The edge decides before the backend: no token, no call.
	if _, err := getOrganization(t, a, testkit.ConnectProto, ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without a token: %v, want unauthenticated", err)
	}
	if b.calls.Load() != 4 {
		t.Fatalf("a call without a token reached the backend")
	}

	// The admin listener: probes and the calls' metrics.
	if status, body := httpGet(t, "http://"+a.AdminAddr()+"/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz: %d %q, want 200 (issuer reachable)", status, body)
	}
	samples := testkit.Scrape(t, "http://"+a.AdminAddr()+"/metrics")
	if n := samples.Sum("edge_requests_total", "code", "ok"); n != 4 {
		t.Errorf("edge_requests_total{code=ok} = %v, want 4", n)
	}
	if n := samples.Sum("edge_requests_total", "code", "unauthenticated"); n != 1 {
		t.Errorf("edge_requests_total{code=unauthenticated} = %v, want 1", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, addr := range []string{a.APIAddr(), a.AdminAddr()} {
		if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after Shutdown", addr)
		}
	}
	select {
	case err := <-a.Failed():
		t.Fatalf("a listener reported %v on a clean shutdown", err)
	default:
	}
}

func TestAConfigurationTheEdgeCannotBuildIsRefusedWithTheSettingNamed(t *testing.T) {
	issuer := testkit.SharedIssuer(t).URL()
	for _, tc := range []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"a trusted proxy that is no address", func(c *config.Config) { c.Listen.ClientAddress.TrustedProxies = []string{"10.0.0.0/33"} }, "listen.client_address.trusted_proxies"},
		{"no issuer", func(c *config.Config) { c.OIDC.IssuerURL = "" }, "issuer URL is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testkit.EdgeConfig(t, "http://127.0.0.1:1", issuer)
			tc.change(cfg)
			a, err := app.New(cfg, quiet(), "test")
			if err == nil {
				a.Close()
				t.Fatal("app.New built the edge")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestListenOnAnAddressInUseSaysWhichListener(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
	}{
		{"listen.addr", func(c *config.Config) { c.Listen.Addr = busy.Addr().String() }},
		{"admin.addr", func(c *config.Config) { c.Admin.Addr = busy.Addr().String() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testkit.EdgeConfig(t, "http://127.0.0.1:1", testkit.SharedIssuer(t).URL())
			tc.set(cfg)
			a, err := app.New(cfg, quiet(), "test")
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			err = a.Listen()
			if err == nil || !strings.HasPrefix(err.Error(), tc.name+":") {
				t.Fatalf("Listen on a busy %s: %v, want an error naming it", tc.name, err)
			}
		})
	}
}

func TestAReloadAppliesANewPlanAndAnInvalidFileChangesNothing(t *testing.T) {
	b := &backend{}
	issuer := testkit.SharedIssuer(t).URL()
	backendURL := startBackend(t, b)
	cfg := testkit.EdgeConfig(t, backendURL, issuer)
	a := start(t, cfg)
	token := testkit.Token(t, issuer, testenv.Unique("free-reload"))
	path := filepath.Join(t.TempDir(), "edge.yaml")
	write := func(plans string) {
		t.Helper()
		yaml := fmt.Sprintf(`upstream:
  url: %s
oidc:
  issuer_url: %s
  audience: %s
redis:
  addr: %s
  key_prefix: %q
limits:
  plans:
%s`, backendURL, issuer, cfg.OIDC.Audience, cfg.Redis.Addr, cfg.Redis.KeyPrefix, plans)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// A file that does not validate: the running policy stays.
	write("    free: {requests_per_minute: -1, burst: 1, requests_per_day: 100, quotas: {concurrent_environments: 2, environments_per_month: 10, vcpu_hours_per_month: 100, memory_gb_hours_per_month: 200}}\n")
	if err := a.Reload(ctxT(t), path); err == nil || !strings.Contains(err.Error(), "requests_per_minute") {
		t.Fatalf("Reload of an invalid file: %v, want an error naming requests_per_minute", err)
	}
	for i := range 2 {
		if _, err := getOrganization(t, a, testkit.ConnectJSON, token); err != nil {
			t.Fatalf("call %d under the running free plan (burst 100): %v", i+1, err)
		}
	}

	// A valid file: its plan decides the next call.
	write("    free: {requests_per_minute: 1, burst: 1, requests_per_day: 100, quotas: {concurrent_environments: 2, environments_per_month: 10, vcpu_hours_per_month: 100, memory_gb_hours_per_month: 200}}\n")
	if err := a.Reload(ctxT(t), path); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	// The first call may find the bucket refilled (a second a call at the
	// old rate); the second finds it empty at 1 a minute.
	_, _ = getOrganization(t, a, testkit.ConnectJSON, token)
	_, err := getOrganization(t, a, testkit.ConnectJSON, token)
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("after a reload to 1 a minute with a burst of 1, two calls in a row: the second got %v, want resource_exhausted", err)
	}
}
