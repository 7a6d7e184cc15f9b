package authn

import "time"

// Seams for this package's tests only.

// WithClock sets the clock that decides whether a cached token has expired.
func WithClock(now func() time.Time) Option { return func(a *Authenticator) { a.now = now } }
