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
// within requests.body_timeout (2 s here). And a keep-alive connection
// whose call was refused after its body was read serves the next call.
func TestARefusedCallThatNeverSendsItsBodyIsAnsweredAndItsConnectionFreed(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Requests.BodyTimeout = 2 * time.Second })
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

	// A refusal after the edge read the body (an Idempotency-Key reused with
	// another body) keeps the connection, and the next calls on it run:
	// nothing of the refusal is left on the connection (a read deadline
	// left in the past there cancelled every later call's context).
	t.Run("keep-alive after a refusal", func(t *testing.T) {
		t.Parallel()
		tok := token("free-keepalive")
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
		call := func(procedure, body, key string) int {
			req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.edge.URL+procedure, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			return res.StatusCode
		}
		const create, list = "/svc.v1.OrganizationService/CreateOrganization", "/svc.v1.OrganizationService/ListOrganizations"
		if got := call(create, `{"name":"kept-alive","billingEmail":"a@b.example"}`, "keep-1"); got != http.StatusOK {
			t.Fatalf("create: %d", got)
		}
		if got := call(create, `{"name":"another","billingEmail":"a@b.example"}`, "keep-1"); got != http.StatusBadRequest {
			t.Fatalf("the key reused with another body: %d, want 400", got)
		}
		for i := range 3 {
			if got := call(list, "{}", ""); got != http.StatusOK {
				t.Fatalf("call %d after a refusal on a kept connection: %d", i, got)
			}
		}
	})
}
