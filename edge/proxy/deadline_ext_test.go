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

// TestForwardedTimeoutDeductsTheTimeSpentInTheEdge: a call whose 200 ms
// deadline is 150 ms gone when it leaves the edge reaches the backend with
// at most 50 ms, in the header of its protocol.
func TestForwardedTimeoutDeductsTheTimeSpentInTheEdge(t *testing.T) {
	seen := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() }))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	p := proxy.New(proxy.Options{Upstream: u, Transport: http.DefaultTransport})
	for _, c := range []struct {
		protocol       wire.Protocol
		header, client string
	}{
		{wire.GRPC, "Grpc-Timeout", "200m"},
		{wire.Connect, "Connect-Timeout-Ms", "200"},
	} {
		t.Run(c.header, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/svc.v1.OrganizationService/ListOrganizations", nil)
			r.Header.Set(c.header, c.client)
			arrived := time.Now().Add(-150 * time.Millisecond) // the edge has spent 150 ms on the call
			deadline := arrived.Add(proxy.Deadline(r, wire.Call{Protocol: c.protocol}, time.Minute))
			ctx, cancel := context.WithDeadline(proxy.WithDeadline(r.Context(), wire.Call{Protocol: c.protocol}, deadline), deadline.Add(time.Second))
			defer cancel()
			p.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
			got := (<-seen).Get(c.header)
			ms, err := strconv.Atoi(strings.TrimSuffix(got, "m"))
			if err != nil || ms < 1 || ms > 50 {
				t.Fatalf("backend got %s %q, want 1-50 ms (200 ms less the 150 ms spent)", c.header, got)
			}
		})
	}
}
