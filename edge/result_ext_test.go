package edge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestEveryCallIsCountedWithTheCodeItsClientSaw: for every protocol, with
// and without gzip, a call that succeeds, one the backend refuses, one the
// edge refuses, a stream the backend refuses and a stream the backend ends
// with an error after a message are each counted in edge_requests_total
// under the code the client's own library reports.
func TestEveryCallIsCountedWithTheCodeItsClientSaw(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour, WatchPoll: time.Hour, WatchAccessCheck: 100 * time.Millisecond}, func(c *config.Config) {
		for i := range c.Operations {
			if c.Operations[i].Procedure == "/svc.v1.BlueprintService/SearchCatalog" {
				c.Operations[i].RatePerMinute = 1
			}
		}
	})
	owner := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("carol"))
	metrics := s.edge.AdminURL + "/metrics"
	// counted waits until the edge counts one more call of method in
	// protocol with code than before.
	count := func(method, protocol, code string) float64 {
		return testkit.Scrape(t, metrics).Sum("edge_requests_total", "method", method, "protocol", protocol, "code", code)
	}
	counted := func(t *testing.T, what, method, protocol, code string, before float64) {
		t.Helper()
		testkit.ScrapeUntil(t, metrics, fmt.Sprintf("%s counted as %s", what, code), func(m testkit.Samples) bool {
			return m.Sum("edge_requests_total", "method", method, "protocol", protocol, "code", code) > before
		})
	}
	for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb, testkit.HTTPJSON} {
		for _, gzip := range []bool{false, true} {
			if gzip && p == testkit.HTTPJSON {
				continue
			}
			label := protocolLabel(p)
			name := fmt.Sprintf("%s/gzip=%v", p, gzip)
			t.Run(name, func(t *testing.T) {
				ctx := ctxT(t)
				who := fmt.Sprintf("free-result-%s-%v", p, gzip)
				c := quotaClients(s.edge.URL, p, token(who), gzip)

				before := count("CreateOrganization", label, "ok")
				_, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: who, BillingEmail: "a@b.example"}))
				if err != nil {
					t.Fatal(err)
				}
				counted(t, "a call that succeeded", "CreateOrganization", label, "ok", before)

				before = count("GetOrganization", label, "not_found")
				_, err = c.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "no-such-org"}))
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("GetOrganization of nothing: %v", err)
				}
				counted(t, "a call the backend refused", "GetOrganization", label, "not_found", before)

				before = count("SearchCatalog", label, "resource_exhausted")
				for range 2 {
					_, err = c.Blueprint.SearchCatalog(ctx, req(&svcv1.SearchCatalogRequest{}))
				}
				if connect.CodeOf(err) != connect.CodeResourceExhausted {
					t.Fatalf("the second SearchCatalog in a minute: %v", err)
				}
				counted(t, "a call the edge refused", "SearchCatalog", label, "resource_exhausted", before)

				if !p.Streams() {
					return
				}
				before = count("WatchEnvironment", label, "not_found")
				stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: "no-such-environment"}))
				if err == nil {
					for stream.Receive() {
					}
					err = stream.Err()
					stream.Close()
				}
				if connect.CodeOf(err) != connect.CodeNotFound {
					t.Fatalf("a watch of nothing: %v", err)
				}
				counted(t, "a stream the backend refused", "WatchEnvironment", label, "not_found", before)

				beforeOK := count("WatchEnvironment", label, "ok")
				before = count("WatchEnvironment", label, "permission_denied")
				code := watchUntilAccessLost(t, ctx, owner, c, who)
				if code != connect.CodePermissionDenied {
					t.Fatalf("the watch ended with %v, want permission_denied", code)
				}
				counted(t, "a stream ended with an error after a message", "WatchEnvironment", label, "permission_denied", before)
				// Not counted ok too, whatever the stream sent before its end.
				if after := count("WatchEnvironment", label, "ok"); after != beforeOK {
					t.Fatalf("the stream ended with permission_denied was also counted ok (%v, then %v)", beforeOK, after)
				}
			})
		}
	}
}

// protocolLabel is the edge's protocol label for a test client's protocol.
func protocolLabel(p testkit.Protocol) string {
	switch p {
	case testkit.GRPC:
		return "grpc"
	case testkit.GRPCWeb:
		return "grpcweb"
	case testkit.HTTPJSON:
		return "http"
	}
	return "connect"
}

// watchUntilAccessLost makes who, the caller of c, a member of a new
// organization of owner's with an environment, watches that environment
// through c until its first message, has owner remove the member, and
// returns the code the watch ended with.
func watchUntilAccessLost(t *testing.T, ctx context.Context, owner, c testkit.Clients, who string) connect.Code {
	t.Helper()
	orgID, projectID := project(t, owner, "watched-"+who)
	envID, err := createEnv(ctx, owner, projectID, "e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: orgID, Email: who + "@example.com", Role: "member"})); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: envID}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("the watch got no first message: %v", stream.Err())
	}
	if _, err := owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: orgID, UserId: devissuer.UserSubject(devissuer.DefaultRealm, who)})); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	return connect.CodeOf(stream.Err())
}

// TestAGzippedGRPCWebCallWithAnIdempotencyKeyRunsOnce: a gRPC-Web client
// that compresses its requests gets compressed answers, trailer frame
// included (flag 0x81); its retry with the same Idempotency-Key is still
// the replay of the first answer, and the backend ran the call once.
func TestAGzippedGRPCWebCallWithAnIdempotencyKeyRunsOnce(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	ctx := ctxT(t)
	c := quotaClients(s.edge.URL, testkit.GRPCWeb, token("pro-gzip-web"), true)
	create := func() (*connect.Response[svcv1.Organization], error) {
		r := req(&svcv1.CreateOrganizationRequest{Name: "gzipped", BillingEmail: "a@b.example"})
		r.Header().Set("Idempotency-Key", "gzip-web-1")
		return c.Org.CreateOrganization(ctx, r)
	}
	first, err := create()
	if err != nil {
		t.Fatal(err)
	}
	retry, err := create()
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if retry.Header().Get("Idempotent-Replayed") != "true" || retry.Msg.Id != first.Msg.Id {
		t.Fatalf("the retry got %s (Idempotent-Replayed %q), want the replay of %s",
			retry.Msg.Id, retry.Header().Get("Idempotent-Replayed"), first.Msg.Id)
	}
	list, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
	if err != nil || len(list.Msg.Organizations) != 1 {
		t.Fatalf("the backend holds %v (%v), want exactly one organization", list, err)
	}
}
