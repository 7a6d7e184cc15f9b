package quota

import "time"

// Seams for this package's tests only.

// WithRenewTicker replaces the ticker that paces lease renewals (Streams;
// default time.NewTicker(period)). newTicker returns the ticks and a stop
// function; tests pass a channel they drive.
func WithRenewTicker(newTicker func(period time.Duration) (ticks <-chan time.Time, stop func())) Option {
	return func(o *options) {
		if newTicker != nil {
			o.ticker = newTicker
		}
	}
}

// WithClock sets the edge's clock (Environments; default time.Now). It
// decides the calendar month (in UTC), compute usage so far, and when a
// pending reservation expires.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}
