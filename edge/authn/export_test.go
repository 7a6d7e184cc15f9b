package authn

import "time"

// Seams for this package's tests only. Set them before the first call.

// SetClock sets the clock that decides whether a cached token has expired
// and refills the failure limit's buckets (default time.Now).
func (a *Authenticator) SetClock(now func() time.Time) { a.now = now }
