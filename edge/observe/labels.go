package observe

// Origins of edge_deadline_exceeded_total.
const (
	DeadlineByClient = "client" // the client's own, shorter deadline passed
	DeadlineByEdge   = "edge"   // the edge's cap passed: the service was too slow
)

// Outcomes of edge_request_duration_seconds: what became of a call.
const (
	OutcomeForwarded = "forwarded" // the backend answered (any code)
	OutcomeRefused   = "refused"   // the edge refused it: the caller's token, role, limits, request
	OutcomeReplayed  = "replayed"  // an idempotent replay, without the backend
	OutcomeError     = "error"     // no answer from the backend, or a dependency of the edge failed, or the client left
)

// Reasons of edge_unavailable_total.
const (
	UnavailableLimits      = "limits"
	UnavailableIdempotency = "idempotency"
	UnavailableIssuer      = "issuer"
	UnavailableUpstream    = "upstream"
)

// grpcCodes are the code label's values, by gRPC status number.
var grpcCodes = [...]string{"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
	"permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented",
	"internal", "unavailable", "data_loss", "unauthenticated"}

// grpcCodeIndex maps a code name back to its number.
var grpcCodeIndex = func() map[string]int {
	m := make(map[string]int, len(grpcCodes))
	for i, c := range grpcCodes {
		m[c] = i
	}
	return m
}()

// codeName is the name of gRPC status n ("unknown" out of range), as
// the code label shows it.
func codeName(n int) string {
	if n >= 0 && n < len(grpcCodes) {
		return grpcCodes[n]
	}
	return "unknown"
}
