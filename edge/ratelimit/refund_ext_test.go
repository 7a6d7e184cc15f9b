package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// A refunded request leaves the day's and the month's counts, those of the
// day it was admitted, never below zero, and frees its place under the
// daily cap (even one this Limiter remembers as refusing); the rate it
// consumed stays consumed.
func TestRefundGivesTheDayBackNeverBelowZeroAndKeepsTheRate(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		edge := newClock(time.Date(2026, 11, 22, 23, 59, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now})
		subject := testenv.Unique("refund")
		req := ratelimit.Request{Subject: subject, Daily: 3,
			Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Hour, Burst: 4}}}
		refund := func(d ratelimit.Decision, want bool) {
			t.Helper()
			if ok, err := l.Refund(ctx, d); err != nil || ok != want {
				t.Fatalf("Refund = %v, %v; want %v", ok, err, want)
			}
		}
		var admitted []ratelimit.Decision
		for range 3 {
			admitted = append(admitted, allow(t, l, req))
		}
		if d := allow(t, l, req); d.Allowed || d.Refused != ratelimit.DailyName {
			t.Fatalf("4th request: %+v, want refused by the daily cap", d)
		}
		refund(admitted[0], true)
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{Today: 2, Month: 2}) {
			t.Fatalf("after a refund: Usage = %+v, %v; want 2 and 2", u, err)
		}
		// The remembered refusal of the cap is gone; the rate's burst of 4
		// is spent by the refunded request too.
		if d := allow(t, l, req); !d.Allowed || state(t, d, "plan").Remaining != 0 {
			t.Fatalf("after a refund: %+v, want admitted with the plan's burst spent", d)
		}
		for _, d := range admitted {
			refund(d, true)
		}
		refund(admitted[0], true) // once more than was counted
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{}) {
			t.Fatalf("more refunds than requests: Usage = %+v, %v; want zero, not negative", u, err)
		}

		// A request admitted before midnight, refunded after: its own day
		// goes back, not the new one.
		roomy := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "roomy", Rate: 10, Period: time.Minute, Burst: 10}}}
		late := allow(t, l, roomy)
		edge.Add(2 * time.Minute)
		if d := allow(t, l, roomy); !d.Allowed || d.Today != 1 || d.Month != 2 {
			t.Fatalf("next day: %+v, want the day's first request, the month's second", d)
		}
		refund(late, true)
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{Today: 1, Month: 1}) {
			t.Fatalf("yesterday's request refunded today: Usage = %+v, %v; want 1 and 1", u, err)
		}

		refund(ratelimit.Decision{}, false) // a refusal, or a decision made without Redis
	})
}
