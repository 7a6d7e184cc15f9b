package edge_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// recordingUpstream answers every call with an empty Connect proto message
// and remembers the headers it saw.
type recordingUpstream struct {
	mu   sync.Mutex
	seen []http.Header
	URL  string
}

func startRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/proto")
		w.WriteHeader(http.StatusOK)
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.URL = "http://" + ln.Addr().String()
	return u
}

func (u *recordingUpstream) last(t *testing.T) http.Header {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return u.seen[len(u.seen)-1]
}

func TestHostileAndHopByHopHeadersDoNotReachTheBackend(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startRecordingUpstream(t)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, up.URL, iss.URL()))
	tok := testkit.Token(t, iss.URL(), "alice")

	send := func(requestID string) *http.Response {
		r, _ := http.NewRequest("POST", e.URL+"/svc.v1.OrganizationService/ListOrganizations", strings.NewReader(""))
		r.Header.Set("Content-Type", "application/proto")
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Connection", "keep-alive, X-Secret-Hop")
		r.Header.Set("X-Secret-Hop", "hop")
		r.Header.Set("Keep-Alive", "timeout=5")
		r.Header.Set("X-Forwarded-For", "6.6.6.6")
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("Idempotent-Replayed", "true")
		r.Header.Set("Via", "1.1 corp-proxy")
		if requestID != "" {
			r.Header.Set("X-Request-Id", requestID)
		}
		res, err := testkit.HTTP1Client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}

	res := send("not a valid id!")
	h := up.last(t)
	for _, name := range []string{"X-Secret-Hop", "Keep-Alive", "Idempotent-Replayed"} {
		if v := h.Get(name); v != "" {
			t.Errorf("backend saw %s: %q", name, v)
		}
	}
	if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the edge's own view of the client, 127.0.0.1", got)
	}
	if got := h.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto %q, want http", got)
	}
	// Via: the client's proxies, then the edge (by a pseudonym of its own).
	if got := h.Values("Via"); len(got) != 2 || got[0] != "1.1 corp-proxy" || !regexp.MustCompile(`^1\.1 orgedge-[0-9a-f]{12}$`).MatchString(got[1]) {
		t.Errorf("Via %q, want the client's entry, then 1.1 orgedge-<12 hex digits>", got)
	}
	generated := res.Header.Get("X-Request-Id")
	if len(generated) != 32 || h.Get("X-Request-Id") != generated {
		t.Errorf("a malformed request id must be replaced: client got %q, backend saw %q", generated, h.Get("X-Request-Id"))
	}

	res = send("trace-0af7651916cd43dd")
	if got := res.Header.Get("X-Request-Id"); got != "trace-0af7651916cd43dd" || up.last(t).Get("X-Request-Id") != got {
		t.Errorf("a well-formed request id must be kept: client got %q", got)
	}
}

func TestClientDeadlinesAreHonoredAndCapped(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startRecordingUpstream(t)
	cfg := testkit.EdgeConfig(t, up.URL, iss.URL())
	cfg.Requests.MaxUnaryTimeout = 5 * time.Second
	cfg.Requests.MaxStreamTimeout = time.Minute
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "alice")
	cases := []struct {
		name, procedure, contentType, header, value, wantHeader, want string
	}{
		{"GRPCWithinCap", "ListOrganizations", "application/grpc", "Grpc-Timeout", "1500m", "Grpc-Timeout", "1500m"},
		{"GRPCOverCap", "ListOrganizations", "application/grpc", "Grpc-Timeout", "1H", "Grpc-Timeout", "5000m"},
		{"GRPCNone", "ListOrganizations", "application/grpc", "", "", "Grpc-Timeout", "5000m"},
		{"GRPCInvalid", "ListOrganizations", "application/grpc", "Grpc-Timeout", "soon", "Grpc-Timeout", "5000m"},
		{"ConnectWithinCap", "ListOrganizations", "application/proto", "Connect-Timeout-Ms", "250", "Connect-Timeout-Ms", "250"},
		{"ConnectOverCap", "ListOrganizations", "application/json", "Connect-Timeout-Ms", "99999999", "Connect-Timeout-Ms", "5000"},
		{"StreamCap", "WatchEnvironment", "application/connect+proto", "Connect-Timeout-Ms", "3600000", "Connect-Timeout-Ms", "60000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			service := "OrganizationService"
			if c.procedure == "WatchEnvironment" {
				service = "EnvironmentService"
			}
			r, _ := http.NewRequest("POST", e.URL+"/svc.v1."+service+"/"+c.procedure, strings.NewReader(""))
			r.Header.Set("Content-Type", c.contentType)
			r.Header.Set("Authorization", "Bearer "+tok)
			if c.header != "" {
				r.Header.Set(c.header, c.value)
			}
			start := time.Now()
			res, err := testkit.H2CClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			// The edge deducts the time it spent before forwarding, which
			// is less than the whole round trip.
			took := time.Since(start)
			got, want := up.last(t).Get(c.wantHeader), c.want
			if c.wantHeader == "Grpc-Timeout" && strings.HasSuffix(got, "m") {
				got, want = strings.TrimSuffix(got, "m"), strings.TrimSuffix(want, "m")
			}
			gotMS, err1 := strconv.Atoi(got)
			wantMS, err2 := strconv.Atoi(want)
			if err1 != nil || err2 != nil || gotMS > wantMS || time.Duration(wantMS-gotMS)*time.Millisecond > took+time.Millisecond {
				t.Fatalf("backend saw %s %q, want %q less at most the %v the call took", c.wantHeader, up.last(t).Get(c.wantHeader), c.want, took)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, cert := newCertificate(t, "edge test")
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSListenerServesHTTP2ByALPNAndHTTP1(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Listen.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	})
	if !strings.HasPrefix(s.edge.URL, "https://") {
		t.Fatalf("edge URL %s", s.edge.URL)
	}
	for _, h2 := range []bool{true, false} {
		var p http.Protocols
		p.SetHTTP1(!h2)
		p.SetHTTP2(h2)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &p}}
		opts := []connect.ClientOption{}
		if h2 {
			opts = append(opts, connect.WithGRPC())
		}
		c := svcv1connect.NewOrganizationServiceClient(hc, s.edge.URL, opts...)
		r := req(&svcv1.ListOrganizationsRequest{})
		r.Header().Set("Authorization", "Bearer "+token("alice"))
		if _, err := c.ListOrganizations(ctxT(t), r); err != nil {
			t.Fatalf("h2=%v: %v", h2, err)
		}
	}
}

// TestShutdownEndsOpenStreamsUnavailable: a stream open when the edge
// shuts down ends at once with unavailable (EDGE_SHUTTING_DOWN) in its
// protocol, not held through the grace, and the shutdown completes well
// within its grace. (cmd/edge's TestSigtermEndsOpenStreamsUnavailableAndExitsZero
// does the same through the binary and SIGTERM.)
func TestShutdownEndsOpenStreamsUnavailable(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour, WatchPoll: 50 * time.Millisecond}, nil)
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("carol"))
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "drain", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	shutdown := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- s.edge.App.Shutdown(sctx)
	}()
	// The environment provisions for an hour: only the edge ends it.
	if stream.Receive() {
		t.Fatalf("a message while provisioning: %v", stream.Msg())
	}
	wantError(t, stream.Err(), connect.CodeUnavailable, "EDGE_SHUTTING_DOWN", "edge")
	if err := <-shutdown; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("shutdown: %v", err)
	}
}
