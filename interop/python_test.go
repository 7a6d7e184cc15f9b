package interop_test

import (
	"testing"

	"github.com/orgedge/edge/internal/testkit"
)

// TestPythonGRPCIORetryPolicyRetriesUnavailableAndReadsRefusals: Debian's
// grpcio, with generic stubs over the API's descriptors: a unary call, the
// 4 attempts of a retry policy when the edge answers unavailable, and a
// rate refusal's code, details and pushback.
func TestPythonGRPCIORetryPolicyRetriesUnavailableAndReadsRefusals(t *testing.T) {
	t.Parallel()
	bin := python(t)
	s := startStack(t, stackOptions{dead: true})
	var out struct{ Unary, Retry, Rate grpcReport }
	runJSON(t, map[string]any{
		"edge": hostPort(s.edge.URL), "dead": hostPort(s.dead.URL), "descriptors": s.descriptors,
		"pro": s.token(t, "pro-grpcio"), "free": s.token(t, "free-grpcio"),
	}, &out, bin, "python/grpcio_checks.py")

	t.Run("unary", func(t *testing.T) { wantCode(t, "ListOrganizations", out.Unary, "OK") })
	t.Run("retry-policy-unavailable", func(t *testing.T) {
		wantCode(t, "ListOrganizations with the backend down", out.Retry, "UNAVAILABLE")
		// grpcio does not tell its attempts; the edge counts each once
		// its answer is out.
		attempts := func(m testkit.Samples) float64 {
			return m.Sum("edge_requests_total", "method", "ListOrganizations", "protocol", "grpc", "code", "unavailable")
		}
		m := testkit.ScrapeUntil(t, s.dead.AdminURL+"/metrics", "the client's attempts counted",
			func(m testkit.Samples) bool { return attempts(m) >= 4 })
		if got := attempts(m); got != 4 {
			t.Fatalf("the edge answered %v attempts, want the policy's 4", got)
		}
	})
	t.Run("rate-refusal", func(t *testing.T) { checkGRPCRate(t, out.Rate) })
}
