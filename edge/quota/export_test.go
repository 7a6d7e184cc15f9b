package quota

import "time"

// Seams for this package's tests only. Set them before the first call.

// SetRenewTicker replaces the ticker that paces s's lease renewals (default
// time.NewTicker(period)). newTicker returns the ticks and a stop function;
// tests pass a channel they drive.
func (s *Streams) SetRenewTicker(newTicker func(period time.Duration) (ticks <-chan time.Time, stop func())) {
	s.opts.ticker = newTicker
}

// SetClock sets e's clock (default time.Now). It decides the calendar month
// (in UTC), compute usage so far, and when a pending reservation expires.
func (e *Environments) SetClock(now func() time.Time) { e.opts.now = now }
