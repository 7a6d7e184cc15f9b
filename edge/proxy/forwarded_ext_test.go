package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/wire"
)

// The backend gets the same forwarded header whichever way the call goes:
// over the pool's HTTP/1.1 leg (which writes it from the client's header
// straight onto the connection), over its HTTP/2 leg (a gRPC call), or
// through a transport of its own (which gets it as a map). Each drops what
// the client's Connection header names, the hop-by-hop and the edge's
// internal headers and the client's Forwarded and X-Forwarded-*; sets
// X-Forwarded-* from what the edge saw; puts the edge's Via entry after the
// client's; and says in the timeout header what is left of the deadline.
func TestForwardedHeaderIsTheSameOnEveryLeg(t *testing.T) {
	seen := make(chan *http.Request, 1)
	up := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		_, _ = w.Write([]byte("{}"))
	}))
	u, _ := url.Parse(up.URL)
	pseudonym := proxy.NewPseudonym()
	pool := proxy.NewPool(proxy.PoolOptions{Upstreams: []*url.URL{u}, DialTimeout: 2 * time.Second, HTTP2: proxy.IsGRPC})
	defer pool.Close()

	for _, c := range []struct {
		name        string
		transport   http.RoundTripper
		contentType string
		protocol    wire.Protocol
		timeout     string // the protocol's header
		client      string // 200 ms in it, from the client
		wantProto   int
	}{
		{"the pool's HTTP/1.1 leg", pool, "application/json", wire.Connect, "Connect-Timeout-Ms", "200", 1},
		{"the pool's HTTP/2 leg", pool, "application/grpc", wire.GRPC, "Grpc-Timeout", "200m", 2},
		{"a transport of its own", http.DefaultTransport, "application/grpc", wire.GRPC, "Grpc-Timeout", "200m", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := proxy.New(proxy.Options{Upstream: u, Transport: c.transport, Pseudonym: pseudonym})
			r := hostileCall("http://api.example.com/svc.v1.OrganizationService/GetOrganization", c.contentType)
			r.Header.Set("Via", "1.0 corporate-proxy")
			r.Header.Set(c.timeout, c.client)
			r.Header.Set("X-Tenant", "tenant-a")
			arrived := time.Now().Add(-150 * time.Millisecond) // the edge has spent 150 ms on the call
			deadline := arrived.Add(proxy.Deadline(r, wire.Call{Protocol: c.protocol}, time.Minute))
			ctx, cancel := context.WithDeadline(proxy.WithDeadline(r.Context(), wire.Call{Protocol: c.protocol}, deadline), deadline.Add(time.Second))
			defer cancel()
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, r.WithContext(ctx))
			if rec.Code != http.StatusOK {
				t.Fatalf("client got %d %q", rec.Code, rec.Body)
			}
			in := <-seen
			if in.ProtoMajor != c.wantProto {
				t.Errorf("backend got HTTP/%d, want HTTP/%d", in.ProtoMajor, c.wantProto)
			}
			for _, h := range []string{"Connection", "X-Secret", "Keep-Alive", "X-Edge-Subject", "Forwarded"} {
				if v := in.Header.Values(h); len(v) != 0 {
					t.Errorf("backend got %s: %q", h, v)
				}
			}
			want := map[string]string{
				"X-Forwarded-For": "192.0.2.7", "X-Forwarded-Host": "api.example.com", "X-Forwarded-Proto": "http",
				"Via": "1.0 corporate-proxy,1.1 " + pseudonym, "X-Tenant": "tenant-a",
			}
			for h, v := range want {
				if got := strings.Join(in.Header.Values(h), ","); got != v {
					t.Errorf("backend got %s %q, want %q", h, got, v)
				}
			}
			got := in.Header.Values(c.timeout)
			ms, err := strconv.Atoi(strings.TrimSuffix(strings.Join(got, ","), "m"))
			if err != nil || ms < 1 || ms > 50 {
				t.Errorf("backend got %s %q, want one value of 1-50 ms (200 ms less the 150 ms spent)", c.timeout, got)
			}
		})
	}
}

// hostileCall is a call from 192.0.2.7 whose header holds what must not
// reach the backend as it is: a Connection header naming X-Secret, a
// hop-by-hop header, the edge's internal X-Edge-Subject, and the client's
// own X-Forwarded-For and Forwarded; and X-Tenant, which must.
func hostileCall(target, contentType string) *http.Request {
	r := httptest.NewRequest("POST", target, strings.NewReader("{}"))
	r.RemoteAddr = "192.0.2.7:4321"
	r.Header.Set("Content-Type", contentType)
	r.Header.Set("Connection", "X-Secret, keep-alive")
	r.Header.Set("X-Secret", "s")
	r.Header.Set("Keep-Alive", "timeout=5")
	r.Header.Set("X-Edge-Subject", "forged")
	r.Header.Set("X-Forwarded-For", "203.0.113.1")
	r.Header.Set("Forwarded", "for=203.0.113.1")
	r.Header.Set("X-Tenant", "tenant-a")
	return r
}
