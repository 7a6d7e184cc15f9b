package proxy

import "time"

// Observer counts what the pool sees of each backend; edge/observe
// implements it. Backend addresses come from configuration or DNS, never
// from a client, so there are as many as the operator runs.
type Observer interface {
	// Backend returns what counts the backend at addr, from when it joins
	// the pool until its Forget, when it leaves (DNS no longer names it).
	// A new backend passes its health checks until it fails them.
	Backend(addr string) BackendObserver
}

// BackendObserver counts one backend's calls and standing.
type BackendObserver interface {
	// Called counts one call sent to the backend, by its result (Answered,
	// Failed, Abandoned), and how long the backend took to answer its
	// headers (the whole answer on the HTTP/1.1 leg) or to fail.
	Called(result string, d time.Duration)
	// Ejected counts the start of an ejection, by reason (EjectedRefused,
	// EjectedFailures, EjectedTimeout); EjectionOver tells its end.
	Ejected(reason string)
	EjectionOver()
	// Healthy tells a change of the health checks' verdict.
	Healthy(ok bool)
	Forget()
}

// Results of a call, for BackendObserver.Called.
const (
	// Answered: the backend answered (whatever the answer says).
	Answered = "answered"
	// Failed: the backend refused the connection, broke it, or answered
	// nothing HTTP can read: its own failure.
	Failed = "failed"
	// Abandoned: the caller's deadline ran out or the caller left before
	// the answer: not the backend's failure.
	Abandoned = "abandoned"
)

// Reasons of an ejection, for BackendObserver.Ejected.
const (
	// EjectedRefused: the backend refused a connection.
	EjectedRefused = "refused"
	// EjectedFailures: failuresToEject calls in a row failed.
	EjectedFailures = "failures"
	// EjectedTimeout: a call's deadline ran out while the backend held it,
	// and the backend then failed a health check.
	EjectedTimeout = "timeout"
)

// CallResults and EjectionReasons list the values above, for an
// Observer that makes every series exist from the start.
var (
	CallResults     = []string{Answered, Failed, Abandoned}
	EjectionReasons = []string{EjectedRefused, EjectedFailures, EjectedTimeout}
)

// nopObserver is the Observer of a pool that was given none.
type nopObserver struct{}

func (nopObserver) Backend(string) BackendObserver { return nopObserver{} }
func (nopObserver) Called(string, time.Duration)   {}
func (nopObserver) Ejected(string)                 {}
func (nopObserver) EjectionOver()                  {}
func (nopObserver) Healthy(bool)                   {}
func (nopObserver) Forget()                        {}
