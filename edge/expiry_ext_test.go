package edge_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// expiryOf reads a JWT's exp claim (the token is the test's own).
func expiryOf(t *testing.T, token string) time.Time {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Exp == 0 {
		t.Fatalf("exp claim: %v", err)
	}
	return time.Unix(c.Exp, 0)
}

// TestOpenWatchStreamEndsUnauthenticatedWhenItsTokenExpires: a
// WatchEnvironment stream opened with a 2-second token ends with
// unauthenticated, reason TOKEN_EXPIRED, in the stream's protocol once the
// token's expiry plus the edge's clock skew has passed, and not before; a
// fresh token opens a new stream.
func TestOpenWatchStreamEndsUnauthenticatedWhenItsTokenExpires(t *testing.T) {
	t.Parallel()
	cfg := devissuer.DefaultConfig()
	cfg.TokenTTL = 2 * time.Second
	iss, err := devissuer.Start("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{ProvisionDelay: time.Hour})
	ecfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	const skew = time.Second
	ecfg.OIDC.ClockSkew = skew
	e := testkit.StartEdge(t, ecfg)
	const who = "pro-longstream"
	// The environment to watch, each call with a fresh token: on a busy
	// machine three calls can outlast one 2-second token.
	fresh := func() testkit.Clients {
		return testkit.NewClients(e.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), who))
	}
	ctx := ctxT(t)
	org, err := fresh().Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "expiry", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := fresh().Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := fresh().Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	id := env.Msg.Environment.Id

	for _, p := range testkit.Protocols {
		if !p.Streams() {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			tok := testkit.Token(t, iss.URL(), who)
			end := expiryOf(t, tok).Add(skew)
			c := testkit.NewClients(e.URL, p, tok)
			stream, err := c.Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() {
				t.Fatalf("first message: %v", stream.Err())
			}
			for stream.Receive() {
			}
			ended := time.Now()
			wantError(t, stream.Err(), connect.CodeUnauthenticated, "TOKEN_EXPIRED", "edge")
			// The edge's clock and the issuer's are the same here; a
			// second of rounding in exp.
			if ended.Before(end.Add(-time.Second)) {
				t.Errorf("the stream ended at %v, before its token's expiry plus skew (%v)", ended, end)
			}

			again, err := testkit.NewClients(e.URL, p, testkit.Token(t, iss.URL(), who)).Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
			if err != nil || !again.Receive() {
				t.Fatalf("a new stream with a fresh token: %v %v", err, again.Err())
			}
			again.Close()
		})
	}
}
