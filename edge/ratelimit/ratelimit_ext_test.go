package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

func TestFreePlanBurstThen429WithRetryAfter(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		req := ratelimit.Request{Subject: testenv.Unique("free"), Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily}
		start := time.Now()
		for i := range 100 {
			if d := allow(t, l, req); !d.Allowed || d.Source != ratelimit.SourceRedis {
				t.Fatalf("request %d of the burst: %+v", i+1, d)
			}
		}
		// 60/min: one request frees up every second after the burst. A
		// loaded machine may take seconds to send it: allow the refills
		// (no real-clock threshold on how fast the calls go).
		admitted := 100
		first := allow(t, l, req)
		for first.Allowed && admitted < 100+int(time.Since(start)/time.Second)+1 {
			admitted++
			first = allow(t, l, req)
		}
		if first.Allowed || first.Refused != "plan" || first.Source != ratelimit.SourceRedis {
			t.Fatalf("after %d admitted in %v: %+v, want refused by plan", admitted, time.Since(start), first)
		}
		if first.RetryAfter <= 0 || first.RetryAfter > time.Second {
			t.Fatalf("RetryAfter = %v, want at most the 1s that frees a request", first.RetryAfter)
		}
		if s := state(t, first, "plan"); s.Remaining != 0 || s.Limit != 60 || s.Burst != 100 || s.Window != time.Minute {
			t.Fatalf("plan state %+v", s)
		}
		if s := state(t, first, ratelimit.DailyName); s.Remaining != freeDaily-admitted {
			t.Fatalf("daily state %+v, want %d remaining", s, freeDaily-admitted)
		}
		// The refusal consumed nothing: had it, the next retry would be ~2s.
		second := allow(t, l, req)
		if !second.Allowed && second.RetryAfter > first.RetryAfter {
			t.Fatalf("next request: %+v, want refused with RetryAfter <= %v", second, first.RetryAfter)
		}
		if second.Allowed {
			admitted++ // a second passed since the refusal: a refill, not a consumed refusal
		}
		if second.Today != int64(admitted) {
			t.Fatalf("Today = %d, want the %d admitted", second.Today, admitted)
		}
	})
}

func TestRefusedByOperationLimitLeavesThePlanUntouched(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		subject := testenv.Unique("op")
		create := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan, createOp}, Daily: freeDaily}
		for i := range 10 {
			if d := allow(t, l, create); !d.Allowed {
				t.Fatalf("CreateEnvironment %d: %+v", i+1, d)
			}
		}
		d := allow(t, l, create)
		if d.Allowed || d.Refused != createOp.Name || d.RetryAfter <= 0 || d.RetryAfter > 6*time.Second {
			t.Fatalf("11th CreateEnvironment: %+v, want refused by %s within 6s", d, createOp.Name)
		}
		if s := state(t, d, "plan"); s.Remaining != 90 {
			t.Fatalf("plan state in the refusal = %+v, want 90 remaining (not consumed)", s)
		}
		list := allow(t, l, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily})
		if s := state(t, list, "plan"); !list.Allowed || s.Remaining != 89 {
			t.Fatalf("next plan-only request: %+v, want allowed with 89 remaining", list)
		}
		if list.Today != 11 {
			t.Fatalf("Today = %d, want 11", list.Today)
		}
	})
}

// A request may carry more limits than a call's usual two (the operator
// API peeks at every operation's at once): each is its own, and the one
// that runs out refuses, in Allow and in Peek alike.
func TestEachOfManyLimitsIsItsOwn(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		lims := []ratelimit.Limit{
			// Hourly rates: nothing refills while the test runs, however
			// slow the machine.
			{Name: "plan", Rate: 60, Period: time.Hour, Burst: 50},
			{Name: "op:A", Rate: 30, Period: time.Hour, Burst: 20},
			{Name: "op:B", Rate: 1, Period: time.Hour, Burst: 3},
			{Name: "op:C", Rate: 10, Period: time.Hour, Burst: 10},
		}
		req := ratelimit.Request{Subject: testenv.Unique("many"), Limits: lims, Daily: 1000}
		for i := range 3 {
			d := allow(t, l, req)
			if !d.Allowed || len(d.States) != 5 {
				t.Fatalf("request %d: %+v, want allowed with a state per limit and the daily cap", i+1, d)
			}
			for _, lim := range lims {
				if s := state(t, d, lim.Name); s.Burst != lim.Burst || s.Remaining != lim.Burst-i-1 {
					t.Fatalf("request %d: %s state %+v, want %d remaining of its burst of %d", i+1, lim.Name, s, lim.Burst-i-1, lim.Burst)
				}
			}
		}
		d := allow(t, l, req)
		if d.Allowed || d.Refused != "op:B" {
			t.Fatalf("4th request: %+v, want refused by op:B", d)
		}
		p, err := l.Peek(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if s := state(t, p, "op:B"); s.Remaining != 0 {
			t.Fatalf("peek: op:B %+v, want none remaining", s)
		}
		if s := state(t, p, "op:C"); s.Remaining != 7 {
			t.Fatalf("peek: op:C %+v, want 7 remaining (the refusal consumed nothing)", s)
		}
	})
}

func TestDailyCapRefusesUntilUTCMidnightThenTheNextDayPasses(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		edge := newClock(time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
		huge := ratelimit.Limit{Name: "plan", Rate: 1_000_000, Period: time.Minute, Burst: 1_000_000}
		req := ratelimit.Request{Subject: testenv.Unique("daily"), Limits: []ratelimit.Limit{huge}, Daily: 3}
		for i := range 3 {
			if d := allow(t, l, req); !d.Allowed || d.Today != int64(i+1) {
				t.Fatalf("request %d: %+v", i+1, d)
			}
		}
		d := allow(t, l, req)
		if d.Allowed || d.Refused != ratelimit.DailyName || d.RetryAfter != time.Hour {
			t.Fatalf("4th request at 23:00 UTC: %+v, want refused by daily for 1h", d)
		}
		if s := state(t, d, ratelimit.DailyName); s.Remaining != 0 || s.ResetAfter != time.Hour || s.Limit != 3 {
			t.Fatalf("daily state %+v", s)
		}
		if s := state(t, d, "plan"); s.Remaining < 999_990 {
			t.Fatalf("plan state %+v: the refusal must not consume the plan", s)
		}
		edge.Add(30 * time.Minute)
		if d := allow(t, l, req); d.Allowed || d.RetryAfter != 30*time.Minute {
			t.Fatalf("at 23:30: %+v, want refused for 30m", d)
		}
		edge.Set(time.Date(2026, 11, 23, 0, 0, 1, 0, time.UTC))
		if d := allow(t, l, req); !d.Allowed || d.Today != 1 || d.Month != 4 {
			t.Fatalf("next day: %+v, want allowed, first of the day, 4th of the month", d)
		}
	})
}

func TestOneRequestMayCostMore(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		req := ratelimit.Request{Subject: testenv.Unique("cost"), Limits: []ratelimit.Limit{createOp}, Daily: 100, Cost: 4}
		for _, want := range []bool{true, true, false} {
			if d := allow(t, l, req); d.Allowed != want {
				t.Fatalf("%+v, want allowed=%v", d, want)
			}
		}
		req.Cost = 2
		if d := allow(t, l, req); !d.Allowed || d.Today != 10 || state(t, d, createOp.Name).Remaining != 0 {
			t.Fatalf("cost 2 into the last 2: %+v", d)
		}
	})
}

func TestTwoReplicasTogetherAdmitWhatOneWould(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		replicas := []*ratelimit.Limiter{
			ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second}),
			ratelimit.New(rdb, ratelimit.Options{Timeout: 5 * time.Second}),
		}
		// A burst of 100 that does not refill while the test runs.
		limit := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 100}
		req := ratelimit.Request{Subject: testenv.Unique("replicas"), Limits: []ratelimit.Limit{limit}}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for _, l := range replicas {
			for range 100 {
				wg.Go(func() {
					d, err := l.Allow(context.Background(), req)
					if err != nil {
						t.Error(err)
					}
					if d.Allowed {
						admitted.Add(1)
					}
				})
			}
		}
		wg.Wait()
		if n := admitted.Load(); n != 100 {
			t.Fatalf("admitted %d of 200 concurrent requests, want exactly 100", n)
		}
		for _, l := range replicas {
			if s := l.Stats(); s.AllowedFailOpen+s.RefusedFailOpen != 0 {
				t.Fatalf("a replica decided locally: %+v", s)
			}
		}
	})
}

func TestUsageCountsTodayAndThisMonth(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		edge := newClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
		subject := testenv.Unique("usage")
		enterprise := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "plan", Rate: 1000, Period: time.Minute, Burst: 2000}}}
		for range 3 {
			allow(t, l, enterprise)
		}
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{Today: 3, Month: 3}) {
			t.Fatalf("Usage = %+v, %v; want 3 today, 3 this month", u, err)
		}
		edge.Add(24 * time.Hour)
		if d := allow(t, l, enterprise); d.Today != 1 || d.Month != 4 {
			t.Fatalf("next day: Today %d Month %d, want 1 and 4", d.Today, d.Month)
		}
		edge.Set(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{}) {
			t.Fatalf("new month: Usage = %+v, %v; want zero", u, err)
		}
		if u, err := l.Usage(ctx, testenv.Unique("nobody")); err != nil || u != (ratelimit.Usage{}) {
			t.Fatalf("unknown subject: Usage = %+v, %v", u, err)
		}
	})
}

// Subjects are arbitrary strings: braces in them must not move a key of
// the request to another cluster slot (CROSSSLOT), nor merge two subjects.
func TestSubjectsWithAnyCharactersKeepTheirOwnLimits(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		one := ratelimit.Limit{Name: "op:{Create}Environment", Rate: 1, Period: time.Hour, Burst: 1}
		base := testenv.Unique("odd")
		for _, subject := range []string{base + "{a}", base + "}{", base + "{", base + "{}", base + " ünïcode\x00\n", base} {
			req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan, one}, Daily: 5}
			if d := allow(t, l, req); !d.Allowed {
				t.Fatalf("first request of %q: %+v", subject, d)
			}
			if d := allow(t, l, req); d.Allowed || d.Refused != one.Name {
				t.Fatalf("second request of %q: %+v, want refused by %s", subject, d, one.Name)
			}
		}
	})
}

// Limits and policies are named by the operator's configuration, which
// may hold any character: each name, quotation marks, backslashes, control
// characters and bytes that are not UTF-8 among them, names its own limit
// in the subject's hash, byte for byte, and the policy charged is kept as
// it was given.
func TestLimitsWithAnyCharactersInTheirNamesKeepTheirOwnState(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		l := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1})
		names := []string{"q", `q"`, `q\`, `q\"`, "q\x01", "q\n", "q\u00fc", "q\xff\xfe", `q\u0041`}
		var limits []ratelimit.Limit
		for _, name := range names {
			limits = append(limits, ratelimit.Limit{Name: name, Rate: 1, Period: time.Hour, Burst: 1})
		}
		subject := testenv.Unique("odd-names")
		policy := "pl\"an\\\x02\xff"
		if d := allow(t, l, ratelimit.Request{Subject: subject, Limits: limits, Policy: policy}); !d.Allowed {
			t.Fatalf("first request: %+v", d)
		}
		got := fields(t, rdb, subject)
		for _, name := range names {
			if got["t:"+name] == "" || got["i:"+name] != "3600" {
				t.Errorf("limit %q has no state of its own in the hash %q", name, got)
			}
		}
		if got["p"] != policy {
			t.Errorf("the policy charged is %q, want %q", got["p"], policy)
		}
		if want := 2*len(names) + 3; len(got) != want { // and p, d:, m:
			t.Errorf("the hash has %d fields, want %d: %q", len(got), want, got)
		}
		for _, lim := range limits {
			d := allow(t, l, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{lim}, Policy: policy})
			if d.Allowed || d.Refused != lim.Name {
				t.Errorf("a second request under %q: %+v, want refused by it", lim.Name, d)
			}
		}
	})
}

func TestARefusalIsRememberedUntilItsRetryTime(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		edge := newClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
		one := ratelimit.Limit{Name: "plan", Rate: 1, Period: time.Hour, Burst: 1}
		req := ratelimit.Request{Subject: testenv.Unique("cache"), Limits: []ratelimit.Limit{one, createOp}, Cost: 1}
		allow(t, l, req)
		refused := allow(t, l, req)
		if refused.Allowed || refused.Source != ratelimit.SourceRedis {
			t.Fatalf("second request: %+v", refused)
		}
		calls := l.Stats().RedisCalls
		edge.Add(time.Minute)
		d := allow(t, l, req)
		if d.Allowed || d.Source != ratelimit.SourceCache || d.Refused != "plan" || d.RetryAfter != refused.RetryAfter-time.Minute {
			t.Fatalf("a minute later: %+v, want refused from the cache for %v", d, refused.RetryAfter-time.Minute)
		}
		if got := l.Stats().RedisCalls; got != calls {
			t.Fatalf("the cached refusal called Redis (%d calls, want %d)", got, calls)
		}
		// Other limits of the subject are not refused by it.
		if d := allow(t, l, ratelimit.Request{Subject: req.Subject, Limits: []ratelimit.Limit{createOp}}); !d.Allowed {
			t.Fatalf("a request under other limits: %+v", d)
		}
		// Nor the same limit with other numbers (the plan changed).
		if d := allow(t, l, ratelimit.Request{Subject: req.Subject, Limits: []ratelimit.Limit{freePlan}}); d.Source != ratelimit.SourceRedis {
			t.Fatalf("after a plan change: %+v, want Redis to decide", d)
		}
		edge.Add(refused.RetryAfter)
		if d := allow(t, l, req); d.Source != ratelimit.SourceRedis {
			t.Fatalf("after the retry time: %+v, want Redis to decide", d)
		}
		if s := l.Stats(); s.RefusedCache != 1 {
			t.Fatalf("RefusedCache = %d, want 1", s.RefusedCache)
		}
	})
}

func TestInvalidRequestsAreErrors(t *testing.T) {
	l := ratelimit.New(testenv.Redis(t), ratelimit.Options{})
	cases := []struct {
		name string
		req  ratelimit.Request
	}{
		{"NoSubject", ratelimit.Request{Limits: []ratelimit.Limit{freePlan}}},
		{"NegativeCost", ratelimit.Request{Subject: "s", Cost: -1}},
		{"NegativeDailyCap", ratelimit.Request{Subject: "s", Daily: -1}},
		{"UnnamedLimit", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Rate: 1, Period: time.Second, Burst: 1}}}},
		{"LimitNamedDaily", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Name: "daily", Rate: 1, Period: time.Second, Burst: 1}}}},
		{"LimitNamedLikeTheDayCounter", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Name: "day:2026-11-22", Rate: 1, Period: time.Second, Burst: 1}}}},
		{"SameLimitTwice", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{freePlan, freePlan}}},
		{"ZeroRate", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Name: "x", Period: time.Second, Burst: 1}}}},
		{"ZeroPeriod", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Name: "x", Rate: 1, Burst: 1}}}},
		{"ZeroBurst", ratelimit.Request{Subject: "s", Limits: []ratelimit.Limit{{Name: "x", Rate: 1, Period: time.Second}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d, err := l.Allow(context.Background(), c.req); err == nil {
				t.Fatalf("Allow = %+v, want an error", d)
			}
		})
	}
	if s := l.Stats(); s.RedisCalls != 0 {
		t.Fatalf("invalid requests reached Redis: %+v", s)
	}
}
