package proxy_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/wire"
)

// BenchmarkProxyHop forwards one small unary call, with a client's usual
// headers and its deadline set as the edge sets it, through the proxy and
// the pool to a loopback backend: over pooled HTTP/1.1 (Connect, JSON,
// gRPC-Web) and over h2c (gRPC).
func BenchmarkProxyHop(b *testing.B) {
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		_, _ = w.Write([]byte(`{"id":"org_123","name":"bench"}`))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: backend, Protocols: &protocols}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	u, _ := url.Parse("http://" + ln.Addr().String())
	p := proxy.New(proxy.Options{Upstream: u, Pseudonym: proxy.NewPseudonym()}) // as the edge: Via on every call
	for _, c := range []struct {
		name, contentType string
		protocol          wire.Protocol
	}{
		{"http1", "application/json", wire.Connect},
		{"h2c", "application/grpc", wire.GRPC},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/svc.v1.OrganizationService/GetOrganization", strings.NewReader(`{"id":"org_123"}`))
				// What a Connect or gRPC client sends, and what the edge adds.
				r.Header.Set("Content-Type", c.contentType)
				r.Header.Set("User-Agent", "connect-go/1.19.1 (go1.25.0)")
				r.Header.Set("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
				r.Header.Set("Accept-Encoding", "gzip")
				r.Header.Set("Connect-Protocol-Version", "1")
				r.Header.Set("X-Request-Id", "01JDQ4Z3W8N5V7K2M9P6R1T3XY")
				call := wire.Call{Protocol: c.protocol}
				ctx := proxy.WithDeadline(r.Context(), call, time.Now().Add(proxy.Deadline(r, call, time.Minute)))
				w := httptest.NewRecorder()
				p.ServeHTTP(w, r.WithContext(ctx))
				if w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
