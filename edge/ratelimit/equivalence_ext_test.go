package ratelimit_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// step sends times requests of a cost, moving the clock by every before each.
type step struct {
	every time.Duration
	cost  int
	times int
}

var equivalenceCases = []struct {
	name  string
	limit ratelimit.Limit
	steps []step
}{
	{"FreePlanBurstThenSteadyTraffic", freePlan, []step{
		{0, 1, 120}, {500 * time.Millisecond, 1, 10}, {time.Second, 1, 10}, {1500 * time.Millisecond, 1, 10},
		{time.Hour, 1, 1}, {0, 1, 105},
	}},
	{"FastRateFineTimeSteps", ratelimit.Limit{Name: "fast", Rate: 10, Period: time.Second, Burst: 3}, []step{
		{0, 1, 5}, {time.Microsecond, 1, 5}, {33 * time.Millisecond, 1, 20}, {99_999 * time.Microsecond, 1, 20},
		{100 * time.Millisecond, 1, 10}, {101 * time.Millisecond, 1, 10},
	}},
	{"OddPeriodAndRate", ratelimit.Limit{Name: "odd", Rate: 7, Period: 13 * time.Second, Burst: 5}, []step{
		{0, 1, 8}, {1300 * time.Millisecond, 1, 12}, {700 * time.Millisecond, 1, 12}, {13 * time.Second, 1, 3},
	}},
	{"CostAboveOne", freePlan, []step{
		{0, 7, 16}, {time.Second, 7, 5}, {7 * time.Second, 7, 5}, {10 * time.Second, 30, 4}, {time.Minute, 3, 40},
	}},
	{"CostAboveBurstNeverPasses", ratelimit.Limit{Name: "small", Rate: 5, Period: time.Minute, Burst: 5}, []step{
		{0, 6, 2}, {time.Hour, 6, 2}, {0, 5, 2},
	}},
	// A period that is not whole seconds reaches the script as a fraction
	// ("1.5", "0.35" in its JSON arguments): the same doubles as redis_rate's.
	{"FractionalPeriods", ratelimit.Limit{Name: "frac", Rate: 3, Period: 1500 * time.Millisecond, Burst: 2}, []step{
		{0, 1, 4}, {100 * time.Millisecond, 1, 10}, {499 * time.Millisecond, 1, 10}, {700 * time.Millisecond, 1, 6},
	}},
	{"TinyFractionalPeriod", ratelimit.Limit{Name: "tiny", Rate: 7, Period: 350 * time.Millisecond, Burst: 4}, []step{
		{0, 1, 6}, {time.Millisecond, 1, 20}, {49 * time.Millisecond, 1, 12}, {51 * time.Millisecond, 2, 12},
	}},
	{"OperationLimitTenPerMinute", createOp, []step{
		{0, 1, 12}, {5 * time.Second, 1, 12}, {6 * time.Second, 1, 12}, {59 * time.Second, 1, 12},
	}},
}

// TestScriptDecidesExactlyAsRedisRate runs the same sequences through
// redis_rate v10 and through this package's script (one limit), on one
// miniredis whose clock only moves when told, and requires every decision to
// be equal: allowed, remaining, retry after and reset after.
func TestScriptDecidesExactlyAsRedisRate(t *testing.T) {
	m := miniredis.RunT(t)
	start := time.Date(2026, 11, 22, 10, 0, 0, 123_456_000, time.UTC)
	m.SetTime(start)
	m.ClockTTL(true) // keys expire as the clock moves, as on a real server
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	// Without this the comparison would be between two real-time runs.
	got, err := rdb.Eval(ctx, `return redis.call("TIME")`, nil).StringSlice()
	if want := []string{strconv.FormatInt(start.Unix(), 10), "123456"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("TIME inside Lua = %v, %v; want miniredis's set clock %v", got, err, want)
	}

	theirs := redis_rate.NewLimiter(rdb)
	for _, c := range equivalenceCases {
		t.Run(c.name, func(t *testing.T) {
			now := start
			m.SetTime(now)
			edge := newClock(now)
			ours := ratelimit.New(rdb, ratelimit.Options{Now: edge.Now, RefusalCache: -1, Timeout: time.Second})
			subject := testenv.Unique("equiv")
			rrLimit := redis_rate.Limit{Rate: c.limit.Rate, Period: c.limit.Period, Burst: c.limit.Burst}
			n, refused := 0, 0
			t.Cleanup(func() {
				if !t.Failed() && (refused == 0 || refused == n) {
					t.Errorf("%d of %d requests refused: the sequence must have both outcomes", refused, n)
				}
			})
			for _, s := range c.steps {
				for range s.times {
					now = now.Add(s.every)
					m.SetTime(now)
					edge.Set(now)
					n++
					want, err := theirs.AllowN(ctx, subject, rrLimit, s.cost)
					if err != nil {
						t.Fatal(err)
					}
					d := allow(t, ours, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{c.limit}, Cost: s.cost})
					compareWithRedisRate(t, n, d, want)
					if !d.Allowed {
						refused++
					}
				}
			}
		})
	}
}

func compareWithRedisRate(t *testing.T, n int, d ratelimit.Decision, want *redis_rate.Result) {
	t.Helper()
	retry := d.RetryAfter
	if d.Allowed {
		retry = -1 // redis_rate's "not refused"
	}
	s := d.States[0]
	if d.Allowed != (want.Allowed > 0) || s.Remaining != want.Remaining || retry != want.RetryAfter || s.ResetAfter != want.ResetAfter {
		t.Fatalf("request %d: got allowed=%v remaining=%d retry=%v reset=%v; redis_rate allowed=%d remaining=%d retry=%v reset=%v",
			n, d.Allowed, s.Remaining, retry, s.ResetAfter, want.Allowed, want.Remaining, want.RetryAfter, want.ResetAfter)
	}
	if !d.Allowed && d.Refused != s.Name {
		t.Fatalf("request %d: refused by %q, want %q", n, d.Refused, s.Name)
	}
}

// TestScriptDecidesAsRedisRateOnRealServers is the coarse version on
// redis-server and the cluster, whose clock runs: the same decisions, and
// durations equal within the time between the two calls.
func TestScriptDecidesAsRedisRateOnRealServers(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		theirs := redis_rate.NewLimiter(rdb)
		ours := ratelimit.New(rdb, ratelimit.Options{RefusalCache: -1, Timeout: time.Second})
		// A slow rate, so that no request refills between the two calls.
		limit := ratelimit.Limit{Name: "slow", Rate: 5, Period: time.Hour, Burst: 5}
		subject := testenv.Unique("equiv-real")
		for i, cost := range []int{1, 1, 2, 1, 1, 3, 1} {
			want, err := theirs.AllowN(ctx, subject, redis_rate.Limit{Rate: limit.Rate, Period: limit.Period, Burst: limit.Burst}, cost)
			if err != nil {
				t.Fatal(err)
			}
			d := allow(t, ours, ratelimit.Request{Subject: subject, Limits: []ratelimit.Limit{limit}, Cost: cost})
			retry := d.RetryAfter
			if d.Allowed {
				retry = -1
			}
			s := d.States[0]
			if d.Allowed != (want.Allowed > 0) || s.Remaining != want.Remaining ||
				!near(retry, want.RetryAfter) || !near(s.ResetAfter, want.ResetAfter) {
				t.Fatalf("request %d (cost %d): got allowed=%v remaining=%d retry=%v reset=%v; redis_rate %+v",
					i, cost, d.Allowed, s.Remaining, retry, s.ResetAfter, want)
			}
		}
	})
}

func near(a, b time.Duration) bool { return (a - b).Abs() < 250*time.Millisecond }
