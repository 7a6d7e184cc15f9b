package edge_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
)

// cuttingProxy is a TCP proxy in front of a backend that cuts every
// connection through it, both ways, when told: a connection that breaks
// after the backend received a call and before its answer arrives.
type cuttingProxy struct {
	addr  string
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startCuttingProxy(t *testing.T, target string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &cuttingProxy{addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns[client], p.conns[server] = struct{}{}, struct{}{}
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			go pipe(server, client)
			go pipe(client, server)
		}
	}()
	return p
}

// cut closes every connection through the proxy.
func (p *cuttingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// sideEffectBackend counts the organizations it creates and the reads it
// answers; once armed, the next call it runs cuts its connection after
// doing its work, before its answer leaves.
type sideEffectBackend struct {
	svcv1connect.UnimplementedOrganizationServiceHandler
	proxy   *cuttingProxy
	armed   atomic.Bool
	creates atomic.Int64
	reads   atomic.Int64
}

func (b *sideEffectBackend) CreateOrganization(_ context.Context, r *connect.Request[svcv1.CreateOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	b.creates.Add(1) // committed
	b.maybeCut()
	return connect.NewResponse(&svcv1.Organization{Id: "org_1", Name: r.Msg.GetName()}), nil
}

func (b *sideEffectBackend) GetOrganization(_ context.Context, r *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	b.reads.Add(1)
	b.maybeCut()
	return connect.NewResponse(&svcv1.Organization{Id: r.Msg.GetOrganizationId(), Name: "n"}), nil
}

func (b *sideEffectBackend) maybeCut() {
	if b.armed.CompareAndSwap(true, false) {
		b.proxy.cut()
	}
}

// A call that may have reached the backend is sent again only if the
// operation table marks it read-only: a CreateOrganization with an
// Idempotency-Key whose connection breaks after the backend committed it
// runs once (the client is told unavailable), in every protocol; a
// GetOrganization on the HTTP/1.1 leg is sent again and answered.
func TestUpstreamCallThatMayHaveReachedTheBackendIsSentAgainOnlyIfReadOnly(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	b := &sideEffectBackend{}
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewOrganizationServiceHandler(b))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	b.proxy = startCuttingProxy(t, ln.Addr().String())
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, "http://"+b.proxy.addr, iss.URL()))
	tok := testkit.Token(t, iss.URL(), "enterprise-resend")

	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			ctx := ctxT(t)
			org := testkit.NewClients(e.URL, p, tok).Org
			warm := func() {
				t.Helper()
				// A call that leaves an open connection to the backend for
				// the next one (only a reused connection is sent on again).
				if _, err := org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "org_1"})); err != nil {
					t.Fatalf("warm-up call: %v", err)
				}
			}

			warm()
			creates := b.creates.Load()
			keyed := clientsSending(e.URL, p, tok, http.Header{"Idempotency-Key": {"resend-" + string(p)}}).Org
			b.armed.Store(true)
			_, err := keyed.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "acme", BillingEmail: "b@acme.example"}))
			if got := b.creates.Load() - creates; got != 1 {
				t.Errorf("the backend created %d organizations for one keyed call, want 1", got)
			}
			if ce := new(connect.Error); !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
				t.Errorf("keyed call whose connection broke: %v, want unavailable", err)
			}

			if p == testkit.GRPC {
				return // the h2c leg does not send a call again once it left (docs/edge.md)
			}
			warm()
			reads := b.reads.Load()
			b.armed.Store(true)
			if _, err := org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "org_1"})); err != nil {
				t.Errorf("read-only call whose connection broke: %v, want it sent again and answered", err)
			}
			if got := b.reads.Load() - reads; got != 2 {
				t.Errorf("the backend ran the read %d times, want 2 (sent again)", got)
			}
		})
	}
}
