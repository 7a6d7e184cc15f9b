// Package early slows the clients that ignore Retry-After, one limit of
// one subject at a time. When the limit step refuses a subject's call for
// a limit and names the time to retry (Told), a later call of the same
// subject that the same limit decides, made before that time, is early:
// that limit would refuse it again. Past Options.Max early calls in a row,
// the subject's early calls for that limit are held until the time (at
// most Options.MaxHold), then decided as any call.
//
// Nothing else is ever held: not a call of another subject on the same
// connection (a proxy in front multiplexes many), not a call of the same
// subject that the refusing limit does not decide (another operation, when
// an operation's own rate refused), not a call that comes after the time.
// A client that waits as told never meets a hold.
//
// It decides how long to hold, not how: the chain holds the call (and
// counts the wait in the call's duration), so that the call's other bounds
// (calls in flight, the body's deadline) are kept while it waits.
package early

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Options are the bounds of the holds.
type Options struct {
	// Max is how many early calls in a row a subject may make for one
	// limit before its early calls for that limit are held; 0: none is
	// held.
	Max int
	// MaxHold bounds one hold (a daily limit's Retry-After is hours).
	// Default one minute.
	MaxHold time.Duration
	// MaxHeld bounds the calls of one subject held at once: past it an
	// early call is not held (the limit refuses it at once). Default 1024.
	MaxHeld int
	// OnHold is called for each held call.
	OnHold func()
}

// maxTold bounds the refusals remembered. Past it, a new refusal is
// remembered only once an expired one is dropped.
const maxTold = 100_000

// Holds remembers the refusals that named a retry time, and decides which
// calls to hold. Its zero value is not usable: build it with New.
type Holds struct {
	o Options

	mu   sync.Mutex
	told map[key]*told
	held map[string]int // calls held now, by subject
	// remembered is len(told), read without the lock: most calls find
	// nothing to look up.
	remembered atomic.Int64
	// stopped is closed by Stop: every hold ends.
	stopped  chan struct{}
	stopOnce sync.Once
}

type key struct{ subject, limit string }

// told is what a subject was last told of one limit.
type told struct {
	at        time.Time       // when the refusal was decided
	notBefore time.Time       // the time it named
	early     int             // early calls in a row since
	holding   bool            // Max was passed: early calls are held
	policy    <-chan struct{} // closed once the refusal's policy is replaced
}

// New returns the holds; nil when o.Max is 0 (no call is ever held).
func New(o Options) *Holds {
	if o.Max <= 0 {
		return nil
	}
	if o.MaxHold <= 0 {
		o.MaxHold = time.Minute
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = 1024
	}
	return &Holds{o: o, told: map[key]*told{}, held: map[string]int{}, stopped: make(chan struct{})}
}

// Told notes that a call of subject decided at now was refused by limit,
// which will refuse again until after; policy is closed when the policy
// that decided it is replaced (nil: never).
func (h *Holds) Told(subject, limit string, now time.Time, after time.Duration, policy <-chan struct{}) {
	if h == nil || after <= 0 {
		return
	}
	k := key{subject, limit}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.told[k]
	if !ok {
		if len(h.told) >= maxTold && !h.sweep(now) {
			return
		}
		t = &told{}
		h.told[k] = t
		h.remembered.Store(int64(len(h.told)))
	}
	if t.policy != policy {
		t.early, t.holding = 0, false
	}
	t.at, t.notBefore, t.policy = now, now.Add(after), policy
}

// sweep drops the refusals whose time has passed; it reports whether one
// was. The caller holds h.mu.
func (h *Holds) sweep(now time.Time) bool {
	n := len(h.told)
	for k, t := range h.told {
		if !now.Before(t.notBefore) || replaced(t.policy) {
			delete(h.told, k)
		}
	}
	h.remembered.Store(int64(len(h.told)))
	return len(h.told) < n
}

// Remembers reports whether any refusal is remembered: when none is, no
// call is early. Safe on a nil Holds.
func (h *Holds) Remembers() bool { return h != nil && h.remembered.Load() > 0 }

// Stop ends every hold, now and from now on: the edge is shutting down,
// and a held call must not keep it waiting (over HTTP/1.1 a held call
// whose client left is not noticed until its body is read). The calls are
// decided at once. Safe on a nil Holds, and more than once.
func (h *Holds) Stop() {
	if h != nil {
		h.stopOnce.Do(func() { close(h.stopped) })
	}
}

// Hold is one held call: how long to hold it, and what ends the hold
// sooner (the refusal's policy replaced).
type Hold struct {
	For     time.Duration
	Ended   <-chan struct{}
	h       *Holds
	subject string
}

// Arrive counts a call of subject, arriving at now, that limits decide
// (a call may be decided by several: the plan's rate, its daily cap, an
// operation's rate). It returns the hold to apply, if any (zero For:
// decide the call at once); a hold must be ended with Done.
func (h *Holds) Arrive(subject string, limits []string, now time.Time) Hold {
	if h == nil {
		return Hold{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.told) == 0 {
		return Hold{}
	}
	var hold Hold
	for _, limit := range limits {
		k := key{subject, limit}
		t, ok := h.told[k]
		if !ok || !now.After(t.at) {
			// Not refused, or sent before the refusal was answered.
			continue
		}
		if replaced(t.policy) || !now.Before(t.notBefore) {
			// The time has come (or no longer says anything): the
			// client starts afresh.
			delete(h.told, k)
			h.remembered.Store(int64(len(h.told)))
			continue
		}
		t.early++
		if t.early > h.o.Max {
			t.holding = true
		}
		if t.holding {
			if d := min(t.notBefore.Sub(now)+spread(t.notBefore.Sub(t.at)), h.o.MaxHold); d > hold.For {
				hold.For, hold.Ended = d, t.policy
			}
		}
	}
	if hold.For <= 0 || h.held[subject] >= h.o.MaxHeld {
		return Hold{}
	}
	h.held[subject]++
	hold.h, hold.subject = h, subject
	if h.o.OnHold != nil {
		h.o.OnHold()
	}
	return hold
}

// Wait holds the caller for the hold's time, or until its policy is
// replaced; false if ctx ended first (the client left: nothing to answer).
// It ends the hold either way.
func (hd Hold) Wait(ctx context.Context) bool {
	defer hd.done()
	t := time.NewTimer(hd.For)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-hd.Ended: // nil (never) when the policy is not known
		return true
	case <-hd.h.stopped:
		return true
	case <-ctx.Done():
		return false
	}
}

func (hd Hold) done() {
	h := hd.h
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[hd.subject]--; h.held[hd.subject] <= 0 {
		delete(h.held, hd.subject)
	}
}

// Held returns the calls held now, of every subject.
func (h *Holds) Held() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.held {
		n += c
	}
	return n
}

// spread is a random part of a hold past the retry time, up to half the
// time the refusal named (at most a second): a flooder's held calls, all
// told the same time, are decided one after another instead of all at
// once, which would delay whoever else the edge serves at that instant.
func spread(told time.Duration) time.Duration {
	window := min(told/2, time.Second)
	if window <= 0 {
		return 0
	}
	return rand.N(window)
}

// replaced reports whether c, if any, is closed.
func replaced(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
