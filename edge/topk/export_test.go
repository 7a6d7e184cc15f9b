package topk

import "time"

// SetClock makes r read the time from now.
func SetClock(r *Refusals, now func() time.Time) { r.now = now }
