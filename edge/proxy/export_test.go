package proxy

import "time"

// SetIdleCheckAfter sets how long a pooled HTTP/1.1 connection must be idle
// before it is checked, until the returned func restores it.
func SetIdleCheckAfter(d time.Duration) (restore func()) {
	old := idleCheckAfter
	idleCheckAfter = d
	return func() { idleCheckAfter = old }
}
