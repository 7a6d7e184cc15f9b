package edge_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestNoLogLineNamesTheBearerToken runs calls that log at every level
// (answered, refused, replayed, the backend down, an internal backend
// refusal of a forged token) with the edge and the backend logging at debug
// level, and looks for the tokens in every line.
func TestNoLogLineNamesTheBearerToken(t *testing.T) {
	t.Parallel()
	s, token := startTracedStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, func(c *config.Config) {
		c.Log.Level = "debug"
	})
	ctx := ctxT(t)
	tok := token("pro-logged")
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + parts[1] + ".c2lnbmF0dXJlLW9mLW5vLWtleQ"
	secrets := []string{tok, parts[1], parts[2], forged}

	c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, tok)
	id := environmentToWatch(t, c)
	keyed := req(&svcv1.GetEnvironmentRequest{EnvironmentId: id})
	keyed.Header().Set("Idempotency-Key", "logged")
	if _, err := c.Env.GetEnvironment(ctx, keyed); err != nil {
		t.Fatal(err)
	}
	for _, p := range []testkit.Protocol{testkit.GRPC, testkit.HTTPJSON} {
		if _, err := testkit.NewClients(s.edge.URL, p, forged).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("%s, forged token: %v", p, err)
		}
	}
	// The backend verifies tokens itself: a forged one sent to it directly.
	if _, err := testkit.NewClients(s.backend.URL, testkit.ConnectProto, forged).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("backend, forged token: %v", err)
	}
	if _, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{})); err != nil {
		t.Fatal(err)
	}

	// An edge whose backend is down logs the failure to forward.
	dead := "http://" + testkit.DeadAddr(t)
	cfg := testkit.EdgeConfig(t, dead, s.iss)
	cfg.Log.Level = "debug"
	down := testkit.StartEdgeWith(t, cfg, testkit.EdgeOptions{Logger: testkit.Logger(s.edgeLog, "json", slog.LevelDebug)})
	if _, err := testkit.NewClients(down.URL, testkit.GRPC, tok).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("backend down: %v", err)
	}

	// Access lines follow the answers: wait for the last ones.
	const calls = 8
	testkit.WaitFor(t, "an access line per call", func() bool { return strings.Count(s.edgeLog.String(), `"msg":"call"`) >= calls })
	edgeLog, backLog := s.edgeLog.String(), s.backLog.String()
	if n := strings.Count(edgeLog, `"msg":"call"`); n != calls {
		t.Fatalf("%d access lines, want one per call (%d):\n%s", n, calls, edgeLog)
	}
	if !strings.Contains(edgeLog, "upstream unavailable") {
		t.Errorf("no line about the backend being down:\n%s", edgeLog)
	}
	for name, log := range map[string]string{"edge": edgeLog, "backend": backLog} {
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			if line == "" {
				continue
			}
			if !json.Valid([]byte(line)) {
				t.Errorf("%s: not one JSON line: %q", name, line)
			}
			for _, secret := range secrets {
				if strings.Contains(line, secret) {
					t.Errorf("%s log names a token: %s", name, line)
				}
			}
			if strings.Contains(strings.ToLower(line), "bearer ") {
				t.Errorf("%s log names an Authorization header: %s", name, line)
			}
		}
	}
}
