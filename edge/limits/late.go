package limits

import (
	"context"
	"sync"
	"time"

	"github.com/orgedge/edge/edge/quota"
)

// A confirmation that Redis refused (full, or gone) after the backend
// created the environment. The reservation must not expire into a free
// slot: the step keeps confirming it until Redis takes it, and a subject
// with a confirmation outstanding on this replica gets no new reservation
// before that confirmation is in Redis.
type lateConfirm struct {
	res   *quota.Reservation
	id    string
	start time.Time
}

// lateConfirms holds the outstanding confirmations of one replica.
type lateConfirms struct {
	mu      sync.Mutex
	subject map[string][]lateConfirm
	n       int
	dropped uint64 // left to reconciliation past maxLateConfirms
	running bool
}

// maxLateConfirms bounds what one replica keeps retrying: past it, a
// failed confirmation is left to reconciliation.
const maxLateConfirms = 10000

// lateRetryEvery paces the retries while Redis refuses.
const lateRetryEvery = time.Second

// confirmLater keeps c for retries, and starts retrying if nothing does.
func (l *Step) confirmLater(subject string, c lateConfirm) {
	lc := &l.late
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.n >= maxLateConfirms {
		lc.dropped++
		l.log.Warn("environment quota: too many confirmations outstanding; this one is left to reconciliation", "environment", c.id)
		return
	}
	if lc.subject == nil {
		lc.subject = map[string][]lateConfirm{}
	}
	lc.subject[subject] = append(lc.subject[subject], c)
	lc.n++
	if !lc.running {
		lc.running = true
		go l.retryLate()
	}
}

// settleLate confirms subject's outstanding confirmations now; an error
// means one is still outstanding.
func (l *Step) settleLate(ctx context.Context, subject string) error {
	lc := &l.late
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for len(lc.subject[subject]) > 0 {
		c := lc.subject[subject][0]
		if err := c.res.Confirm(ctx, c.id, c.start); err != nil {
			return err
		}
		l.obs.Reservation(ReservationConfirmed)
		lc.subject[subject] = lc.subject[subject][1:]
		lc.n--
	}
	delete(lc.subject, subject)
	return nil
}

// retryLate confirms the outstanding confirmations, one every
// lateRetryEvery while Redis refuses them, all at once when it takes one;
// it returns when none is left.
func (l *Step) retryLate() {
	t := time.NewTicker(lateRetryEvery)
	defer t.Stop()
	for range t.C {
		lc := &l.late
		lc.mu.Lock()
		subjects := make([]string, 0, len(lc.subject))
		for s := range lc.subject {
			subjects = append(subjects, s)
		}
		lc.mu.Unlock()
		for _, s := range subjects {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := l.settleLate(ctx, s)
			cancel()
			if err != nil {
				break // Redis still refuses: wait
			}
		}
		lc.mu.Lock()
		if lc.n == 0 {
			lc.running = false
			lc.mu.Unlock()
			l.log.Info("environment quota: every outstanding confirmation is in Redis")
			return
		}
		lc.mu.Unlock()
	}
}

// CacheStats calls yield for each of the step's in-process tables keyed by
// subject: its name, the entries it holds, its bound, and the entries it
// evicted or turned away for room since start. "shadow_log": the (subject,
// shadow limit) pairs whose log line is paced (10,000, the least recently
// logged forgotten first); "late_confirm": environment confirmations Redis
// refused, retried (10,000; past it, one is left to reconciliation).
func (l *Step) CacheStats(yield func(name string, entries, bound int, evictions uint64)) {
	n, ev := l.shadows.stats()
	yield("shadow_log", n, maxShadowLogged, ev)
	l.late.mu.Lock()
	n, dropped := l.late.n, l.late.dropped
	l.late.mu.Unlock()
	yield("late_confirm", n, maxLateConfirms, dropped)
}
