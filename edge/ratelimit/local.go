package ratelimit

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// refusals remember what Redis refused, by limit, until the refusal expires:
// a subject over a limit is refused again without a round trip. Under
// unchanged numbers a refusal only grows until then (a TAT or a day's count
// does not go back, but for a refund: Refund forgets the day's refusal),
// so the cache never refuses what Redis would admit, for a cost at least as
// high. A refusal holds only for the numbers it was made
// under: a request under others goes to Redis, and its answer replaces it.
type refusals struct {
	cache   *lru.Cache[string, refusal] // by the limit's key
	size    int
	evicted atomic.Uint64
}

type refusal struct {
	id           limitID   // the numbers that refused
	until, reset time.Time // edge clock
	cost         int
}

func newRefusals(size int) *refusals {
	if size < 0 {
		return &refusals{}
	}
	c, _ := lru.New[string, refusal](size) // size > 0: no error
	return &refusals{cache: c, size: size}
}

// decide refuses req if a limit of it is remembered as refusing.
func (r *refusals) decide(req Request, k keys, now time.Time) (Decision, bool) {
	if r.cache == nil {
		return Decision{}, false
	}
	d := Decision{Source: SourceCache}
	check := func(id limitID, name string, limit, burst int, window time.Duration) {
		f, ok := r.cache.Get(id.key)
		if !ok || f.id != id || !now.Before(f.until) || req.Cost < f.cost {
			return
		}
		d.States = append(d.States, State{Name: name, Limit: limit, Burst: burst, Window: window, ResetAfter: f.reset.Sub(now)})
		if after := f.until.Sub(now); after > d.RetryAfter {
			d.Refused, d.RetryAfter = name, after
		}
	}
	for i, lim := range req.Limits {
		check(k.ids[i], lim.Name, lim.Rate, lim.Burst, lim.Period)
	}
	if req.Daily > 0 {
		check(k.dayID, DailyName, req.Daily, req.Daily, 24*time.Hour)
	}
	return d, d.Refused != ""
}

// remember stores the refusing limits of a verdict of Redis.
func (r *refusals) remember(req Request, k keys, v verdict, now time.Time) {
	if r.cache == nil {
		return
	}
	for i, s := range v.States {
		if v.retry[i] < 0 {
			continue
		}
		id := k.dayID
		if i < len(req.Limits) {
			id = k.ids[i]
		}
		id.key = strings.Clone(id.key) // not the whole of the call's keys (keysFor)
		if r.cache.Add(id.key, refusal{id: id, until: now.Add(v.retry[i]), reset: now.Add(s.ResetAfter), cost: req.Cost}) {
			r.evicted.Add(1)
		}
	}
}

// localLimiter decides while Redis fails under FailOpen: this replica alone
// admits its share of each limit, with golang.org/x/time/rate per subject
// and limit, and a count per subject and day. Like the script, it carries
// what a subject spent over a change of a limit's numbers.
type localLimiter struct {
	share float64

	mu    sync.Mutex                    // makes check-then-consume atomic across limits
	rates *lru.Cache[string, localRate] // by the limit's key
	days  *lru.Cache[string, int]       // by the day's key
	size  int

	ratesEvicted, daysEvicted atomic.Uint64
}

// localRate is a subject's local limiter of one limit, and the numbers it
// was made for.
type localRate struct {
	id limitID
	rl *rate.Limiter
}

func newLocalLimiter(share float64, size int) *localLimiter {
	rates, _ := lru.New[string, localRate](size)
	days, _ := lru.New[string, int](size)
	return &localLimiter{share: share, rates: rates, days: days, size: size}
}

// part is this replica's share of n, at least 1.
func (ll *localLimiter) part(n int) int { return max(1, int(ll.share*float64(n))) }

// limiter is the local limiter of lim at now: made afresh (full) for a
// limit it has not seen, or, if lim's numbers changed, made for the new
// ones holding what was spent of the old (in requests, rounded up, at most
// the new burst).
func (ll *localLimiter) limiter(id limitID, lim Limit, now time.Time) *rate.Limiter {
	old, ok := ll.rates.Get(id.key)
	if ok && old.id == id {
		return old.rl
	}
	perSecond := ll.share * float64(lim.Rate) / lim.Period.Seconds()
	rl := rate.NewLimiter(rate.Limit(perSecond), ll.part(lim.Burst))
	if ok {
		spent := math.Ceil(float64(old.rl.Burst()) - old.rl.TokensAt(now) - 1e-9)
		rl.AllowN(now, min(int(max(spent, 0)), rl.Burst()))
	}
	id.key = strings.Clone(id.key) // not the whole of the call's keys (keysFor)
	if ll.rates.Add(id.key, localRate{id: id, rl: rl}) {
		ll.ratesEvicted.Add(1)
	}
	return rl
}

func (ll *localLimiter) decide(req Request, k keys, now time.Time) Decision {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	d := Decision{Allowed: true, Source: SourceFailOpen}
	refuse := func(name string, after time.Duration) {
		if d.Allowed || after > d.RetryAfter {
			d.Refused, d.RetryAfter = name, after
		}
		d.Allowed = false
	}
	cost := float64(req.Cost)
	lims := make([]*rate.Limiter, len(req.Limits))
	for i, lim := range req.Limits {
		rl := ll.limiter(k.ids[i], lim, now)
		lims[i] = rl
		if tokens := rl.TokensAt(now); tokens < cost {
			refuse(lim.Name, secondsOf((cost-tokens)/float64(rl.Limit())))
		}
	}
	used, _ := ll.days.Get(k.day)
	if req.Daily > 0 && used+req.Cost > ll.part(req.Daily) {
		refuse(DailyName, k.midnight.Sub(now))
	}
	if d.Allowed {
		for _, rl := range lims {
			rl.AllowN(now, req.Cost)
		}
		used += req.Cost
		if ll.days.Add(strings.Clone(k.day), used) { // not the whole of the call's keys (keysFor)
			ll.daysEvicted.Add(1)
		}
	}
	for i, lim := range req.Limits {
		rl := lims[i]
		tokens := rl.TokensAt(now)
		d.States = append(d.States, State{
			Name: lim.Name, Limit: lim.Rate, Burst: lim.Burst, Window: lim.Period,
			Remaining:  int(math.Floor(max(0, tokens))),
			ResetAfter: secondsOf((float64(rl.Burst()) - tokens) / float64(rl.Limit())),
		})
	}
	if req.Daily > 0 {
		d.States = append(d.States, k.dailyState(ll.part(req.Daily), int64(used)))
	}
	return d
}

func secondsOf(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
