package call

// Origins of a deadline_exceeded result (edge_deadline_exceeded_total).
const (
	DeadlineByClient = "client" // the client's own, shorter deadline passed
	DeadlineByEdge   = "edge"   // the edge's cap passed before the call reached the backend: the service was too slow
	// DeadlineInBackend: either deadline passed while the backend held the
	// call: the service's failure, whoever chose the deadline.
	DeadlineInBackend = "backend"
)

// Outcomes of a call (edge_request_duration_seconds): what became of it.
const (
	OutcomeForwarded = "forwarded" // the backend answered (any code)
	OutcomeAnswered  = "answered"  // the edge answered it itself (GetUsage, gRPC health, reflection): any code but a fault
	OutcomeRefused   = "refused"   // the edge refused it: the caller's token, role, limits, request
	OutcomeReplayed  = "replayed"  // an idempotent replay, without the backend
	OutcomeError     = "error"     // no answer from the backend, or a dependency of the edge failed, or the client left
)

// Outcomes lists every outcome.
var Outcomes = [...]string{OutcomeForwarded, OutcomeAnswered, OutcomeRefused, OutcomeReplayed, OutcomeError}

// Which dependency one of the edge's own unavailable answers is about
// (edge_unavailable_total).
const (
	UnavailableLimits      = "limits"
	UnavailableIdempotency = "idempotency"
	UnavailableIssuer      = "issuer"
	UnavailableUpstream    = "upstream"
	UnavailableOverload    = "overload" // the edge itself: listen.max_calls_in_flight
	// UnavailableShutdown: a stream the edge ended as it shut down (a
	// rollout), for its client to reconnect to another replica.
	UnavailableShutdown = "shutdown"
)

// UnavailableReasons lists every reason.
var UnavailableReasons = [...]string{UnavailableLimits, UnavailableIdempotency, UnavailableIssuer, UnavailableUpstream, UnavailableOverload, UnavailableShutdown}

// ReasonOverloaded is the ErrorInfo reason of a call the edge refused
// because it already serves listen.max_calls_in_flight calls.
const ReasonOverloaded = "EDGE_OVERLOADED"

// ReasonShuttingDown is the ErrorInfo reason of a stream the edge ended
// because it is shutting down.
const ReasonShuttingDown = "EDGE_SHUTTING_DOWN"
