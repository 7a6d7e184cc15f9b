package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// interval is a limit's emission interval: the time one request takes to
// come back.
func interval(l ratelimit.Limit) time.Duration { return l.Period / time.Duration(l.Rate) }

// spend sends requests under req until the first refusal and returns how
// many were admitted (at most limit+1 are sent).
func spend(t *testing.T, l *ratelimit.Limiter, req ratelimit.Request, limit int) (int, ratelimit.Decision) {
	t.Helper()
	for n := 0; n <= limit; n++ {
		if d := allow(t, l, req); !d.Allowed {
			return n, d
		}
	}
	t.Fatalf("%d requests admitted, want a refusal by then", limit+1)
	return 0, ratelimit.Decision{}
}

// The numbers of a limit change while a subject has spent some of it (an
// operator's reload, or a subject moved to another plan). What the subject
// spent stays spent, in requests; the new numbers decide how many it may
// hold (the burst) and how fast they come back (the rate). So a subject at
// its limit is never locked out when the limit rises, and never gets more
// than the new policy's burst allows when it falls.
//
// Every rate here is slow (an interval of 6 s or more), so that the
// milliseconds the test takes refill nothing: the counts are exact, and a
// refusal's retry is at most one interval of the new numbers (the
// subject's next request under the new policy).
func TestAChangedLimitTakesEffectAtOnceWithWhatTheSubjectSpent(t *testing.T) {
	perHour := func(rate, burst int) ratelimit.Limit {
		return ratelimit.Limit{Name: "plan", Rate: rate, Period: time.Hour, Burst: burst}
	}
	cases := []struct {
		name     string
		old      ratelimit.Limit
		spent    int // -1: until the old limit refuses
		new      ratelimit.Limit
		wantNext int // admitted under the new numbers before the first refusal
	}{
		// The issue: 300 -> 600/min locked pro out for burst x (old - new interval).
		{"RateRaisedAtTheLimit", perHour(60, 10), -1, perHour(120, 10), 0},
		{"RateLoweredAtTheLimit", perHour(120, 10), -1, perHour(60, 10), 0},
		{"BurstRaisedAtTheLimit", perHour(60, 10), -1, perHour(60, 25), 15},
		{"BurstLoweredAtTheLimit", perHour(60, 20), -1, perHour(60, 10), 0},
		{"BurstLoweredBelowWhatWasSpent", perHour(60, 20), 12, perHour(60, 10), 0},
		{"BurstLoweredAboveWhatWasSpent", perHour(60, 20), 4, perHour(60, 10), 6},
		{"PeriodShortened", ratelimit.Limit{Name: "plan", Rate: 60, Period: 2 * time.Hour, Burst: 10}, -1, perHour(60, 10), 0},
		{"PeriodLengthened", perHour(60, 10), -1, ratelimit.Limit{Name: "plan", Rate: 60, Period: 2 * time.Hour, Burst: 10}, 0},
		{"RateAndBurstRaisedTenfoldAtTheLimit", perHour(60, 10), -1, perHour(600, 100), 90},
		{"RateAndBurstRaisedTenfoldPartlySpent", perHour(60, 10), 4, perHour(600, 100), 96},
		{"RateAndBurstLoweredTenfoldPartlySpent", perHour(600, 100), 50, perHour(60, 10), 0},
		{"RateAndBurstLoweredTenfoldLittleSpent", perHour(600, 100), 3, perHour(60, 10), 7},
	}
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				l := ratelimit.New(rdb, ratelimit.Options{})
				subject := testenv.Unique("change")
				req := func(lim ratelimit.Limit) ratelimit.Request {
					return ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{lim}}
				}
				if c.spent < 0 {
					if n, _ := spend(t, l, req(c.old), c.old.Burst); n != c.old.Burst {
						t.Fatalf("old numbers admitted %d, want the burst of %d", n, c.old.Burst)
					}
				} else {
					for i := range c.spent {
						if d := allow(t, l, req(c.old)); !d.Allowed {
							t.Fatalf("old numbers refused request %d of %d: %+v", i+1, c.spent, d)
						}
					}
				}

				n, refusal := spend(t, l, req(c.new), c.new.Burst)
				if n != c.wantNext {
					t.Fatalf("new numbers admitted %d at once, want %d", n, c.wantNext)
				}
				if refusal.Source != ratelimit.SourceRedis || refusal.Refused != "plan" {
					t.Fatalf("refusal %+v, want Redis refusing by plan", refusal)
				}
				if next := interval(c.new); refusal.RetryAfter <= 0 || refusal.RetryAfter > next {
					t.Fatalf("RetryAfter = %v, want at most one interval of the new numbers (%v)", refusal.RetryAfter, next)
				}
				if s := state(t, refusal, "plan"); s.Remaining != 0 || s.Burst != c.new.Burst || s.ResetAfter > time.Duration(c.new.Burst)*interval(c.new) {
					t.Fatalf("plan state %+v, want the new numbers, nothing left, full again within one new burst", s)
				}
			})
		}
	})
}

// After a change, the subject's spent requests come back at the new rate,
// not the old one, even while it is refused (a refusal writes nothing but
// the conversion to the new numbers). Old interval 0.1 s, new one minute: a
// subject refused under the new numbers stays refused however long the
// test takes (up to a minute), where the old numbers would have given one
// request back every 0.1 s.
func TestAfterALimitFallsTheSpentRequestsComeBackAtTheNewRate(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		// A generous Redis deadline: on a busy machine a call past the
		// default 50 ms is decided without Redis (fail-open, admitted),
		// which says nothing of the rate the spent requests come back at.
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1, Timeout: 10 * time.Second})
		subject := testenv.Unique("fall")
		fast := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "plan", Rate: 600, Period: time.Minute, Burst: 10}}}
		slow := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Minute, Burst: 10}}}
		if n, _ := spend(t, l, fast, 100); n < 10 {
			t.Fatalf("fast numbers admitted %d, want at least the burst of 10", n)
		}
		// At the fast numbers' limit; until the first request under the
		// slow ones converts it, the fast rate gives back one per 0.1 s.
		changed := time.Now()
		n, _ := spend(t, l, slow, 10)
		start := time.Now()
		if most := int(start.Sub(changed)/(100*time.Millisecond)) + 1; n > most {
			t.Fatalf("slow numbers admitted %d at once, want at most %d (what the fast ones gave back in %v)", n, most, start.Sub(changed))
		}
		refused := 0
		for time.Since(start) < 500*time.Millisecond || refused < 20 {
			if d := allow(t, l, slow); d.Allowed {
				t.Fatalf("slow numbers admitted a request %v after the change, after %d refusals: the spent requests came back at the old rate", time.Since(start), refused)
			}
			refused++
		}
	})
}

// The state of a limit written before the edge stored its numbers beside it
// (by the previous version, or a key whose numbers expired) is read under
// the numbers in force, and never beyond their burst: a subject at its
// limit under numbers nobody recorded is not locked out.
func TestStateWrittenWithoutItsNumbersIsReadUnderTheNumbersInForce(t *testing.T) {
	rdb := testenv.Redis(t)
	subject := testenv.Unique("legacy")
	// The previous version ran redis_rate's arithmetic on this key (which
	// redis_rate prefixes with "rate:"): a subject at its limit of 10 at one
	// a minute.
	key := "rl:{" + subjectTag(subject) + "}:plan"
	old := redis_rate.NewLimiter(rdb)
	for range 10 {
		if r, err := old.Allow(context.Background(), key, redis_rate.Limit{Rate: 1, Period: time.Minute, Burst: 10}); err != nil || r.Allowed != 1 {
			t.Fatalf("redis_rate: %+v %v", r, err)
		}
	}
	l := ratelimit.New(rdb, ratelimit.Options{KeyPrefix: "rate:"})
	raised := ratelimit.Limit{Name: "plan", Rate: 60, Period: time.Minute, Burst: 10}
	n, refusal := spend(t, l, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{raised}}, 10)
	if n != 0 || refusal.RetryAfter > time.Second {
		t.Fatalf("admitted %d then %+v; want the subject at its limit of the new numbers: refused for at most their interval of 1s", n, refusal)
	}
}

// The refusal cache remembers a refusal with the numbers that made it: a
// request under other numbers is decided by Redis. The daily cap is the
// longest refusal it holds (until midnight).
func TestARefusalRememberedUnderOldNumbersDoesNotOutliveTheirChange(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		edge := newClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
		huge := ratelimit.Limit{Name: "plan", Rate: 1_000_000, Period: time.Minute, Burst: 1_000_000}
		subject := testenv.Unique("cached")
		capped := func(daily int) ratelimit.Request {
			return ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{huge}, Daily: daily}
		}
		if n, d := spend(t, l, capped(3), 3); n != 3 || d.Refused != ratelimit.DailyName {
			t.Fatalf("cap 3: admitted %d, then %+v", n, d)
		}
		if d := allow(t, l, capped(3)); d.Allowed || d.Source != ratelimit.SourceCache {
			t.Fatalf("cap 3 again: %+v, want refused from the cache", d)
		}
		if n, d := spend(t, l, capped(5), 5); n != 2 || d.Source != ratelimit.SourceRedis {
			t.Fatalf("cap raised to 5: admitted %d, then %+v; want 2 more, then Redis refusing", n, d)
		}
		if d := allow(t, l, capped(4)); d.Allowed || d.Refused != ratelimit.DailyName {
			t.Fatalf("cap lowered to 4 with 5 spent: %+v, want refused", d)
		}

		// A rate: refused (and remembered) under a burst of 2 at one an
		// hour; the burst raised to 4 admits two more at once.
		rate := func(burst int) ratelimit.Request {
			return ratelimit.Request{Subject: subject + "/rate", Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: burst}}}
		}
		if n, _ := spend(t, l, rate(2), 2); n != 2 {
			t.Fatalf("burst 2: admitted %d", n)
		}
		if d := allow(t, l, rate(2)); d.Source != ratelimit.SourceCache {
			t.Fatalf("burst 2 again: %+v, want refused from the cache", d)
		}
		if n, _ := spend(t, l, rate(4), 4); n != 2 {
			t.Fatalf("burst raised to 4: admitted %d, want 2", n)
		}
	})
}

// While Redis fails, each replica's local share follows a change the same
// way: what the subject spent of it stays spent. Half of a burst of 10 is
// 5; the rate and the daily cap change under a subject that spent it.
func TestFailOpenShareFollowsAChangeWithWhatTheSubjectSpent(t *testing.T) {
	huge := ratelimit.Limit{Name: "plan", Rate: 1_000_000, Period: time.Minute, Burst: 1_000_000}
	cases := []struct {
		name       string
		old, new   ratelimit.Request
		wantNext   int
		wantRefuse string
	}{
		// 10 a minute, burst 10 (5 here, one every 12 s), to 1 a minute:
		// nothing at once (a fresh local limiter would give 5 again).
		{"RateLowered",
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 10, Period: time.Minute, Burst: 10}}},
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Minute, Burst: 10}}}, 0, "plan"},
		// Burst 10 to 30 (15 here): 10 more.
		{"BurstRaised",
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 10}}},
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 30}}}, 10, "plan"},
		// Burst 10 to 6 (5 to 3 here) with 5 spent: nothing.
		{"BurstLowered",
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 10}}},
			ratelimit.Request{Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 6}}}, 0, "plan"},
		// A cap of 10 (5 here) lowered to 8 (4 here) with 5 spent: nothing.
		{"DailyCapLowered",
			ratelimit.Request{Limits: []ratelimit.Limit{huge}, Daily: 10},
			ratelimit.Request{Limits: []ratelimit.Limit{huge}, Daily: 8}, 0, ratelimit.DailyName},
		// Raised to 20 (10 here): 5 more.
		{"DailyCapRaised",
			ratelimit.Request{Limits: []ratelimit.Limit{huge}, Daily: 10},
			ratelimit.Request{Limits: []ratelimit.Limit{huge}, Daily: 20}, 5, ratelimit.DailyName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdb, _ := countedClient(t, testkit.DeadAddr(t))
			edge := newClock(noon)
			l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now, LocalShare: 0.5, Logger: (&logBuffer{}).Logger()})
			subject := testenv.Unique("open-change")
			c.old.Subject, c.new.Subject = subject, subject
			if n, d := spend(t, l, c.old, 20); n != 5 || d.Source != ratelimit.SourceFailOpen {
				t.Fatalf("old numbers: admitted %d, then %+v; want this replica's 5", n, d)
			}
			n, d := spend(t, l, c.new, 20)
			if n != c.wantNext || d.Refused != c.wantRefuse || d.Source != ratelimit.SourceFailOpen {
				t.Fatalf("new numbers: admitted %d, then %+v; want %d, then refused by %s", n, d, c.wantNext, c.wantRefuse)
			}
		})
	}
}

// A limit's emission interval is stored beside its state as Lua's tostring
// writes it, which is how every earlier build's script wrote it: the edge
// formats it now, and state written before reads as under unchanged
// numbers (not converted, not rewritten). Checked against the script
// engine's own tostring on limits whose intervals print as integers,
// fractions and in exponent form.
func TestTheIntervalIsWrittenAsTheScriptWouldWriteIt(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	l := ratelimit.New(rdb, ratelimit.Options{})
	periods := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour, 1234567 * time.Microsecond}
	rates := []int{1, 3, 7, 60, 1000, 999_983, 10_000_000}
	for _, period := range periods {
		for _, rate := range rates {
			lim := ratelimit.Limit{Name: "plan", Rate: rate, Period: period, Burst: 1}
			subject := testenv.Unique("interval")
			allow(t, l, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{lim}})
			want, err := rdb.Eval(ctx, "return tostring(tonumber(ARGV[1]) / tonumber(ARGV[2]))", nil,
				period.Seconds(), rate).Text()
			if err != nil {
				t.Fatal(err)
			}
			if got := fields(t, rdb, subject)["i:plan"]; got != want {
				t.Errorf("%d per %v: interval stored as %q, the script's tostring writes %q", rate, period, got, want)
			}
		}
	}
}
