package orgsvc_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// startBackend runs the backend as its command does, against issuerURL.
func startBackend(t *testing.T, issuerURL string) *orgsvc.Running {
	t.Helper()
	r, err := orgsvc.Start(ctxT(t), orgsvc.RunOptions{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Database: filepath.Join(t.TempDir(), "orgsvc.db"), IssuerURL: issuerURL, Audience: "api",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	return r
}

func readyz(t *testing.T, adminAddr string) (int, string) {
	t.Helper()
	res, err := testkit.HTTP1Client.Get("http://" + adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestAFreshBackendServesEveryoneAfterACallWithA5msDeadline(t *testing.T) {
	iss := testkit.StartSlowIssuer(t, 200*time.Millisecond)
	r := startBackend(t, iss.URL())
	tok := testkit.Token(t, iss.URL(), "alice")

	// The first call of a fresh backend, with a 5 ms deadline: discovery
	// takes longer. Its own answer does not matter.
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://"+r.Addr+"/svc.v1.OrganizationService/ListOrganizations", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", "5")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := testkit.HTTP1Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()

	for _, who := range []string{"alice", "bob"} {
		c := testkit.NewClients("http://"+r.Addr, testkit.ConnectProto, testkit.Token(t, iss.URL(), who))
		if _, err := c.Org.ListOrganizations(ctxT(t), connect.NewRequest(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatalf("%s, after a 5 ms call: %v", who, err)
		}
	}
}

func TestBackendIsNotReadyUntilItsIdentityProviderIsDiscovered(t *testing.T) {
	iss := testkit.StartSlowIssuer(t, 0)
	iss.Down()
	r := startBackend(t, iss.URL())
	if status, body := readyz(t, r.AdminAddr); status != http.StatusServiceUnavailable || !strings.Contains(body, "identity provider") {
		t.Fatalf("readyz with discovery failing: %d %q", status, body)
	}
	iss.Up()
	// A failed discovery is tried again after a pause of 2 s: ready soon
	// after, without a call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := readyz(t, r.AdminAddr)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 10 s after the issuer came up: %d %q", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
