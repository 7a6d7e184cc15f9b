package limits

// Bounds of the step's tables keyed by subject, for the tests that fill
// them past their bounds.
const (
	MaxShadowLogged = maxShadowLogged
	MaxLateConfirms = maxLateConfirms
)

// NoteShadowLogged takes the (subject, shadow limit) pair for logged now, as
// a shadow refusal does, and reports whether it was not logged lately.
func (l *Step) NoteShadowLogged(subject, limit string) bool {
	return l.shadows.first(subject+"\x00"+limit, l.now())
}

// KeepLateConfirm keeps the confirmation of environment id for subject, as
// one Redis refused is kept, without retrying it: filling the table by
// refused confirmations would take a Redis that refuses ten thousand.
func (l *Step) KeepLateConfirm(subject, id string) {
	l.late.mu.Lock()
	l.late.running = true // nothing retries: the retrying loop counts as running
	l.late.mu.Unlock()
	l.confirmLater(subject, lateConfirm{id: id})
}
