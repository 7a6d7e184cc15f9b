package ratelimit

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// refundScript takes an admitted request's cost back out of the day's and
// the month's counts it was added to, never below zero, and never making
// a count (or the hash) that is not there: a count the hash dropped
// meanwhile (its day is past) stays dropped.
//
// KEYS[1] the subject's hash; ARGV[1] the day's field, ARGV[2] the month's,
// ARGV[3] the cost.
var refundScript = redis.NewScript(`
local cost = tonumber(ARGV[3])
for i = 1, 2 do
  local n = tonumber(redis.call("HGET", KEYS[1], ARGV[i]) or "0")
  if n > 0 then
    redis.call("HINCRBY", KEYS[1], ARGV[i], -math.min(n, cost))
  end
end
return 1
`)

// charge is what the script counted of an admitted request: where, in
// which day and month, and how much. The zero charge is nothing counted in
// Redis (a refusal, or a decision made without Redis).
type charge struct {
	prefix   string    // of the subject's keys
	calendar *calendar // of the day the request was admitted
	cost     int
}

// Refund takes a request that Allow admitted (d) back out of the day's and
// the month's counts, those of the day it was admitted, in one round trip
// under the Limiter's deadline and breaker: the request did not happen
// (the edge could deliver it nowhere). The rates it consumed stay
// consumed: they pace a subject's calls whatever becomes of them. A
// decision Redis did not make (FailOpen, the refusal cache) or a refusal
// counted nothing: Refund then does nothing and reports false.
//
// A refusal of the daily cap that this Limiter remembers for the subject
// is forgotten, since the day's count went back; another replica's stays
// until its expiry (the next midnight), as the count only went back by
// the refunded cost.
func (l *Limiter) Refund(ctx context.Context, d Decision) (bool, error) {
	c := d.charged
	if !d.Allowed || c.calendar == nil {
		return false, nil
	}
	_, err := callAsync(l, ctx, asyncOf(func(ctx context.Context) (any, error) {
		return refundScript.Run(ctx, l.rdb, []string{c.prefix + hashKey}, c.calendar.dayField, c.calendar.monthField, c.cost).Result()
	}))
	if err != nil {
		return false, fmt.Errorf("ratelimit: refund: %w", err)
	}
	if l.refused.cache != nil {
		l.refused.cache.Remove(c.prefix + "day:" + c.calendar.date)
	}
	return true, nil
}
