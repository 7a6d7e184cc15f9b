package limits

import "go.opentelemetry.io/otel/attribute"

// Observer is what the limit step tells whoever counts its decisions (the
// edge's metrics); the step itself imports no metrics library. Its methods
// must be safe for concurrent use and cheap: they run on every call.
type Observer interface {
	// Decided counts one decision of limit for a subject of plan: a
	// refusal names the limit that refused ("plan", "op:<Method>",
	// "daily", "streams", a quota's kind); an admission is counted once,
	// as "rate", whatever limits applied.
	Decided(plan, limit string, allowed bool)
	// ShadowRefused counts a call a shadow limit would have refused.
	ShadowRefused(plan, limit string)
	// LeaseHeld changes the number of stream leases held by delta.
	LeaseHeld(delta float64)
	// Reservation counts an environment reservation's outcome
	// (Reservation*).
	Reservation(outcome string)
	// UnreadableAnswer counts a successful answer of method whose quota
	// effect the edge could not read.
	UnreadableAnswer(method string)
	// Refunded counts the refund of a call no backend received
	// (Refund*; see Step.Undelivered).
	Refunded(outcome string)
}

// Outcomes of an environment reservation (Observer.Reservation).
const (
	ReservationReserved   = "reserved"    // a slot was held before forwarding CreateEnvironment
	ReservationConfirmed  = "confirmed"   // the backend created the environment
	ReservationRolledBack = "rolled_back" // the backend did not: the slot was given back
	ReservationReleased   = "released"    // DeleteEnvironment ended a running environment's quota
	ReservationRefused    = "refused"     // a quota refused the reservation
)

// Reservations lists the reservation outcomes, for an observer to export
// each from the start.
var Reservations = []string{ReservationReserved, ReservationConfirmed, ReservationRolledBack, ReservationReleased, ReservationRefused}

type nopObserver struct{}

func (nopObserver) Decided(string, string, bool) {}
func (nopObserver) ShadowRefused(string, string) {}
func (nopObserver) LeaseHeld(float64)            {}
func (nopObserver) Reservation(string)           {}
func (nopObserver) UnreadableAnswer(string)      {}
func (nopObserver) Refunded(string)              {}

// Attributes the step sets on the span of the call's context (edge.limits).
var (
	attrPlan          = attribute.Key("edge.plan")
	attrLimitsOutcome = attribute.Key("edge.limits.outcome")
	attrLimit         = attribute.Key("edge.limit")
	attrFailOpen      = attribute.Key("edge.limits.fail_open") // admitted without Redis
)
