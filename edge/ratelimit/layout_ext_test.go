package ratelimit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// subjectKeys is every key of subject in Redis, sorted.
func subjectKeys(t *testing.T, rdb redis.UniversalClient, subject string) []string {
	t.Helper()
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, "rl:{"+subjectTag(subject)+"}:*", 100).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(context.Background(), scan)
	case *redis.Client:
		err = scan(context.Background(), c)
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// fields is the subject's hash, field by field.
func fields(t *testing.T, rdb redis.UniversalClient, subject string) map[string]string {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), "rl:{"+subjectTag(subject)+"}:s").Result()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// What a subject leaves in Redis is one key, the hash of its limits' state,
// counts, policy and intervals, which expires a day after the month; its
// memory, by Redis's own accounting, is within the 250 bytes a subject may
// take (issue 22).
func TestASubjectLeavesOneKeyThatExpiresAfterTheMonth(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		now := time.Now().UTC()
		l := ratelimit.New(rdb, ratelimit.Options{Now: time.Now})
		subject := testenv.Unique("one-key")
		req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan, createOp}, Daily: freeDaily, Policy: "free"}
		if d := allow(t, l, req); !d.Allowed || d.Today != 1 || d.Month != 1 {
			t.Fatalf("first request: %+v", d)
		}
		tag := "rl:{" + subjectTag(subject) + "}:"
		if got, want := subjectKeys(t, rdb, subject), []string{tag + "s"}; !slices.Equal(got, want) {
			t.Fatalf("the subject's keys are %v, want %v", got, want)
		}
		got := fields(t, rdb, subject)
		day, month := now.Format(time.DateOnly), now.Format("2006-01")
		want := map[string]string{"d:" + day: "1", "m:" + month: "1", "p": "free", "i:plan": "1", "i:op:CreateEnvironment": "6",
			"t:plan": got["t:plan"], "t:op:CreateEnvironment": got["t:op:CreateEnvironment"]}
		if !maps(got, want) || got["t:plan"] == "" || got["t:op:CreateEnvironment"] == "" {
			t.Fatalf("the subject's hash is %v, want %v with both TATs", got, want)
		}
		ttl, err := rdb.TTL(ctx, tag+"s").Result()
		if err != nil {
			t.Fatal(err)
		}
		y, m, _ := now.Date()
		until := time.Until(time.Date(y, m+1, 2, 0, 0, 0, 0, time.UTC))
		// The script's TTL is whole seconds rounded up, and Redis's TTL
		// rounds to the nearest: up to 1.5 s past the instant.
		if ttl > until+2*time.Second || ttl < until-time.Minute {
			t.Fatalf("the subject's hash expires in %v, want a day after the month (%v)", ttl, until)
		}
		// A subject of the plan's limit alone (most calls have no limit
		// of their own): the keys of the older layout took 442 bytes by
		// MEMORY USAGE (docs/benchmarks.md, "Storage").
		plain := testenv.Unique("one-key-plan")
		allow(t, l, ratelimit.Request{Subject: plain, Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily, Policy: "free"})
		bytes, err := rdb.MemoryUsage(ctx, "rl:{"+subjectTag(plain)+"}:s").Result()
		if err != nil {
			t.Fatal(err)
		}
		if bytes > 250 {
			t.Fatalf("the subject's hash takes %d bytes by MEMORY USAGE, want at most 250", bytes)
		}
		t.Logf("a subject of the plan's limit: %d bytes by MEMORY USAGE", bytes)
	})
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// The day's first admitted request drops the counts of days before
// yesterday and of months before the last, and the TATs of full limits, so
// that a subject active every day keeps a hash of a few fields; yesterday's
// and last month's stay for a replica whose clock lags. A day's count
// starts from zero whatever was counted the day before, and the month's
// goes on through the days.
func TestDaysAndMonthsPastAreDropped(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		clk := newClock(time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC))
		l := ratelimit.New(rdb, ratelimit.Options{Now: clk.Now, RefusalCache: -1})
		subject := testenv.Unique("days-past")
		req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan}, Daily: freeDaily}
		step := func(to time.Time, calls int, today, month int64, want ...string) {
			t.Helper()
			clk.Add(to.Sub(clk.Now()))
			var d ratelimit.Decision
			for range calls {
				d = allow(t, l, req)
			}
			if !d.Allowed || d.Today != today || d.Month != month {
				t.Fatalf("%v: %+v, want admitted, %d today, %d this month", to, d, today, month)
			}
			var got []string
			for f := range fields(t, rdb, subject) {
				if f[:2] == "d:" || f[:2] == "m:" || f[:2] == "t:" {
					got = append(got, f)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%v: the hash counts %v, want %v", to, got, want)
			}
		}
		// The plan's TAT is written by every admitted request (Redis's clock
		// does not move with the edge's: it stays ahead of now).
		step(clk.Now(), 3, 3, 3, "d:2026-01-31", "m:2026-01", "t:plan")
		step(time.Date(2026, 2, 1, 0, 5, 0, 0, time.UTC), 2, 2, 2, "d:2026-01-31", "d:2026-02-01", "m:2026-01", "m:2026-02", "t:plan")
		step(time.Date(2026, 2, 3, 12, 0, 0, 0, time.UTC), 1, 1, 3, "d:2026-02-03", "m:2026-01", "m:2026-02", "t:plan")
		step(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC), 1, 1, 1, "d:2026-03-02", "m:2026-02", "m:2026-03", "t:plan")
		if u, err := l.Usage(context.Background(), subject); err != nil || u != (ratelimit.Usage{Today: 1, Month: 1}) {
			t.Fatalf("Usage = %+v, %v, want 1 today and 1 this month", u, err)
		}
	})
}

// A rolling upgrade runs replicas of the layout before the subject's hash
// (a key for each count and TAT) beside this one: the hash's first count of
// a day starts from what the older keys hold, in decisions and in Usage,
// without writing them; Reset clears them too.
func TestCountsOfTheOlderLayoutStillCount(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		now := time.Now().UTC()
		l := ratelimit.New(rdb, ratelimit.Options{Now: time.Now, RefusalCache: -1})
		subject := testenv.Unique("older-layout")
		tag := "rl:{" + subjectTag(subject) + "}:"
		dayKey, monthKey := tag+"day:"+now.Format(time.DateOnly), tag+"month:"+now.Format("2006-01")
		// What a replica of the older layout has counted today.
		if err := rdb.Set(ctx, dayKey, 7, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, monthKey, 40, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{freePlan}, Daily: 10}
		for want := int64(8); want <= 10; want++ {
			if d := allow(t, l, req); !d.Allowed || d.Today != want || d.Month != want+33 {
				t.Fatalf("%+v, want admitted with %d today and %d this month", d, want, want+33)
			}
		}
		if d := allow(t, l, req); d.Allowed || d.Refused != ratelimit.DailyName {
			t.Fatalf("the 11th request of a daily cap of 10, 7 of them counted by the older layout: %+v", d)
		}
		if u, err := l.Usage(ctx, subject); err != nil || u != (ratelimit.Usage{Today: 10, Month: 43}) {
			t.Fatalf("Usage = %+v, %v, want 10 today and 43 this month", u, err)
		}
		if v := rdb.Get(ctx, dayKey).Val(); v != "7" {
			t.Fatalf("the older layout's day count is %q, want 7 as it wrote it", v)
		}
		if err := l.Reset(ctx, subject, []string{"plan"}); err != nil {
			t.Fatal(err)
		}
		if d := allow(t, l, req); !d.Allowed || d.Today != 1 || d.Month != 44 {
			t.Fatalf("after Reset: %+v, want admitted with 1 today and 44 this month", d)
		}
	})
}

// A refused request whose limit it converted to new numbers writes the
// limit's state; when that makes the subject's hash (the state came from
// the older layout's TAT key), the hash gets its expiry: no key without
// one.
func TestAHashMadeByARefusalExpires(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := ratelimit.New(rdb, ratelimit.Options{Now: time.Now, RefusalCache: -1})
		subject := testenv.Unique("refusal-hash")
		tag := "rl:{" + subjectTag(subject) + "}:"
		// An older replica left the plan's TAT three minutes ahead: three
		// requests spent at one a minute.
		clock, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		tat := float64(clock.Add(3*time.Minute).UnixMicro())/1e6 - 1483228800
		if err := rdb.Set(ctx, tag+"plan", tat, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: time.Minute, Burst: 1}}}
		if d := allow(t, l, req); d.Allowed {
			t.Fatalf("a request past a spent burst admitted: %+v", d)
		}
		if got := fields(t, rdb, subject); got["i:plan"] != "60" || got["t:plan"] == "" {
			t.Fatalf("the refusal left the hash %v, want the limit's TAT and interval, 60", got)
		}
		if ttl := rdb.TTL(ctx, tag+"s").Val(); ttl <= 0 {
			t.Fatalf("the hash a refusal made has TTL %v, want one", ttl)
		}
	})
}

// A limit whose spent requests come back more slowly than the hash lives
// (a month and a day at most) stretches the hash's life to its TAT: the
// day's first request, which sets the expiry, and a later one, which
// takes the TAT further still. Otherwise a subject that spent such a limit
// would find it full once the hash expired.
func TestALimitSlowerThanTheMonthKeepsTheHashAsLongAsItsTAT(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		l := ratelimit.New(rdb, ratelimit.Options{Now: time.Now})
		subject := testenv.Unique("slow-limit")
		const day = 24 * time.Hour
		req := ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{{Name: "plan", Rate: 1, Period: 60 * day, Burst: 2}}, Daily: 10}
		for n, want := range []time.Duration{60 * day, 120 * day} {
			if d := allow(t, l, req); !d.Allowed {
				t.Fatalf("request %d refused: %+v", n+1, d)
			}
			ttl, err := rdb.TTL(ctx, "rl:{"+subjectTag(subject)+"}:s").Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < want-time.Minute || ttl > want+time.Minute {
				t.Fatalf("after request %d the hash expires in %v, want its TAT's %v", n+1, ttl, want)
			}
		}
		if d := allow(t, l, req); d.Allowed {
			t.Fatalf("a third request within the burst of 2 admitted: %+v", d)
		}
	})
}
