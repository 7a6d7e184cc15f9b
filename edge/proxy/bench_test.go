package proxy_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/orgedge/edge/edge/proxy"
)

// BenchmarkProxyHop forwards one small unary call through the proxy and
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
	for _, c := range []struct{ name, contentType string }{
		{"http1", "application/json"},
		{"h2c", "application/grpc"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/svc.v1.OrganizationService/GetOrganization", strings.NewReader(`{"id":"org_123"}`))
				r.Header.Set("Content-Type", c.contentType)
				w := httptest.NewRecorder()
				p.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
