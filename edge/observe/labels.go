package observe

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
