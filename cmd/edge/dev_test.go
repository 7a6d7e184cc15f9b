//go:build !nodev

package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// runDev runs `edge -dev` until the test ends, and returns its output once
// the banner is out (every listener is up). It needs the development
// mode's fixed addresses: an `edge -dev` running on this machine is in the
// way, and the test fails naming the address taken.
func runDev(t *testing.T) *syncBuffer {
	t.Helper()
	for _, addr := range []string{devAPIAddr, devAdminAddr, devIssuerAddr, devBackendAddr, devBackendAdminAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("this test runs `edge -dev` on the development mode's fixed addresses, and %s is taken: "+
				"a running `edge -dev` (or another test of this package, elsewhere on this machine) is in the way; stop it and run again (%v)", addr, err)
		}
		_ = ln.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-dev"}, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge -dev: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Ctrl-C stops everything.") {
		select {
		case err := <-done:
			done <- nil // for the cleanup, which would wait for it forever
			t.Fatalf("edge -dev stopped (is another edge -dev running?): %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner after 30s:\n%s", out.String())
		}
	}
	return out
}

// TestDevModeCurlLinesWorkAsPrinted runs the development mode on its
// contract's addresses and runs the printed commands with bash and curl.
func TestDevModeCurlLinesWorkAsPrinted(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI=true", tool)
			}
			t.Skipf("no %s", tool)
		}
	}
	ctx := t.Context()
	out := runDev(t)
	banner := out.String()
	for _, want := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:9090", "http://127.0.0.1:8081/realms/dev", "http://127.0.0.1:8082", "http://127.0.0.1:9092", "dev-secret", "alice/alice"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q", want)
		}
	}
	var script []string
	for _, line := range strings.Split(banner, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "TOKEN=") || strings.HasPrefix(l, "curl ") {
			script = append(script, l)
		}
	}
	if len(script) != 2 {
		t.Fatalf("want the two printed commands, got %q", script)
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("printed commands failed: %v\n%s", err, got)
	}
	var org struct{ Name, Plan, ID string }
	if err := json.Unmarshal(got, &org); err != nil || org.Name != "acme" || org.Plan != "free" || org.ID == "" {
		t.Fatalf("printed commands answered %s (%v)", got, err)
	}
	// Every dependency of the stack is up: the issuer and the embedded Redis.
	res, err := http.Get("http://127.0.0.1:9090/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz answered %d: %s", res.StatusCode, body)
	}
	// Both admin listeners count the call.
	for url, want := range map[string]string{
		"http://127.0.0.1:9090/metrics": `edge_requests_total{code="ok",method="CreateOrganization"`,
		"http://127.0.0.1:9092/metrics": `orgsvc_requests_total{code="ok",method="CreateOrganization"`,
	} {
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("%s lacks %s", url, want)
		}
	}
}

// TestDevModeBannerNamesTheRedisItUses: with EDGE_REDIS_ADDR the
// development mode uses that Redis, starts no embedded one, and its banner
// says so.
func TestDevModeBannerNamesTheRedisItUses(t *testing.T) {
	addr := testenv.RedisAddr(t)
	t.Setenv("EDGE_REDIS_ADDR", addr)
	banner := runDev(t).String()
	var line string
	for _, l := range strings.Split(banner, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "redis ") {
			line = l
		}
	}
	if !strings.Contains(line, addr) || !strings.Contains(line, "EDGE_REDIS_ADDR") || strings.Contains(banner, "embedded") {
		t.Fatalf("the banner's Redis line is %q, want %s from EDGE_REDIS_ADDR and no embedded store:\n%s", line, addr, banner)
	}
}

// TestDevModeAnyOriginMayFetchATokenAndCallTheAPI: in the development
// mode a page on any origin gets a token from the issuer and its preflight
// and call answered by the edge, readable (Access-Control-Allow-Origin: *).
func TestDevModeAnyOriginMayFetchATokenAndCallTheAPI(t *testing.T) {
	runDev(t)
	const origin = "http://127.0.0.2:3000"
	do := func(method, url, contentType, body string, header ...string) *http.Response {
		t.Helper()
		r, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		r.Header.Set("Origin", origin)
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res
	}
	for what, res := range map[string]*http.Response{
		"token endpoint": do("POST", "http://"+devIssuerAddr+"/realms/dev/protocol/openid-connect/token", "application/x-www-form-urlencoded",
			"grant_type=client_credentials&client_id=svc-viewer&client_secret=dev-secret"),
		"edge preflight": do("OPTIONS", "http://"+devAPIAddr+"/svc.v1.OrganizationService/ListOrganizations", "", "",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type"),
		"edge refusal": do("POST", "http://"+devAPIAddr+"/svc.v1.OrganizationService/ListOrganizations", "application/json", "{}"),
	} {
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s: %d, Access-Control-Allow-Origin %q, want *", what, res.StatusCode, got)
		}
	}
}
