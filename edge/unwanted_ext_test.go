package edge_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/orgsvc"
)

// TestARefusedCallThatNeverSendsItsBodyIsAnsweredAndItsConnectionFreed: a
// client declares a body and never sends it. A call refused before the
// body timer starts (an unknown procedure or content type, another method)
// is answered at once and its connection closed, instead of the server
// waiting for the body with no bound; one refused after it (no token)
// within requests.body_timeout (2 s here).
func TestARefusedCallThatNeverSendsItsBodyIsAnsweredAndItsConnectionFreed(t *testing.T) {
	t.Parallel()
	s, _ := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Requests.BodyTimeout = 2 * time.Second })
	host := strings.TrimPrefix(s.edge.URL, "http://")
	for _, c := range []struct {
		name, method, path, contentType string
		bound                           time.Duration
	}{
		{"unknown procedure", "POST", "/svc.v1.Nothing/Here", "application/json", time.Second},
		{"unsupported content type", "POST", "/svc.v1.OrganizationService/ListOrganizations", "text/plain", time.Second},
		{"another method", "PUT", "/svc.v1.OrganizationService/ListOrganizations", "application/json", time.Second},
		{"no token", "POST", "/svc.v1.OrganizationService/ListOrganizations", "application/json", 2*time.Second + time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(c.bound))
			head := c.method + " " + c.path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: " + c.contentType +
				"\r\nConnect-Protocol-Version: 1\r\nContent-Length: 100\r\n\r\n{"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within %v: %v", c.bound, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode < 400 {
				t.Fatalf("status %d, want a refusal", res.StatusCode)
			}
			// The connection is freed: the edge closes it, since the body
			// it did not read never came.
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the answer the connection %v, want it closed by the edge", err)
			}
			t.Logf("%s: %d, connection closed", c.name, res.StatusCode)
		})
	}
}
