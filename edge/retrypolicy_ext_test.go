package edge_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
)

// TestAGRPCRetryPolicyRetriesTheEdgesUnavailable: grpc-go with a standard
// retry policy (UNAVAILABLE, 4 attempts) against an edge whose backend is
// down makes its 4 attempts, each answered by the edge. The edge's
// refusals are Trailers-Only: a gRPC client never retries a call whose
// headers came before its status (it made 1 attempt).
func TestAGRPCRetryPolicyRetriesTheEdgesUnavailable(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	dead := "http://" + testkit.DeadAddr(t) // the backend is down
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, dead, iss.URL()))

	const policy = `{"methodConfig": [{"name": [{"service": "svc.v1.OrganizationService"}],
		"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.05s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	conn, err := grpc.NewClient(strings.TrimPrefix(e.URL, "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(policy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := metadata.NewOutgoingContext(ctxT(t), metadata.Pairs("authorization", "Bearer "+testkit.Token(t, iss.URL(), "pro-retrying")))
	err = conn.Invoke(ctx, "/svc.v1.OrganizationService/ListOrganizations", &svcv1.ListOrganizationsRequest{}, new(svcv1.ListOrganizationsResponse))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want unavailable", err)
	}
	attempts := func(m testkit.Samples) float64 {
		return m.Sum("edge_requests_total", "method", "ListOrganizations", "protocol", "grpc", "code", "unavailable")
	}
	// Each attempt is counted once its answer is out: wait for the fourth.
	m := testkit.ScrapeUntil(t, e.AdminURL+"/metrics", "the policy's 4 attempts", func(m testkit.Samples) bool { return attempts(m) >= 4 })
	if got := attempts(m); got != 4 {
		t.Fatalf("the edge answered %v attempts, want the policy's 4", got)
	}
}
