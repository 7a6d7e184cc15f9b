package ratelimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// peekScript reads what allow.lua would decide for a request of cost 0,
// without writing anything: each GCRA limit's remaining burst and time to
// full, and the day's and month's counts.
//
//	KEYS as allow.lua; ARGV[1] n, then burst, rate, period of each limit.
//	Returns {today, month} then, per limit, {remaining, tostring(reset_after)}.
var peekScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local result = {
  tonumber(redis.call("GET", KEYS[n + 1]) or "0"),
  tonumber(redis.call("GET", KEYS[n + 2]) or "0"),
}
for i = 1, n do
  local burst, rate, period = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local emission_interval = period / rate
  local tat = tonumber(redis.call("GET", KEYS[i]) or now)
  tat = math.max(tat, now)
  table.insert(result, math.floor((now - (tat - emission_interval * burst)) / emission_interval))
  table.insert(result, tostring(tat - now))
end
return result
`)

// Peek reports the standing of every limit of req and the subject's
// counts, as Allow would see them, without consuming anything: for an
// operator inspecting one subject. It asks Redis directly, outside the
// circuit breaker, within ctx's deadline. Cost and the refusal cache play
// no part.
func (l *Limiter) Peek(ctx context.Context, req Request) (Decision, error) {
	req.Cost = 1
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	k := keysFor(l.opts.KeyPrefix, req, l.opts.Now())
	args := []any{len(req.Limits)}
	for _, lim := range req.Limits {
		args = append(args, lim.Burst, lim.Rate, lim.Period.Seconds())
	}
	v, err := peekScript.Run(ctx, l.rdb, k.all, args...).Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: peek: %w", err)
	}
	if len(v) != 2+2*len(req.Limits) {
		return Decision{}, fmt.Errorf("ratelimit: peek answered %d values for %d limits", len(v), len(req.Limits))
	}
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	d := Decision{Allowed: true, Source: SourceRedis, Today: n(0), Month: n(1)}
	for i, lim := range req.Limits {
		reset, err := seconds(v[3+2*i])
		if err != nil {
			return Decision{}, err
		}
		d.States = append(d.States, State{
			Name: lim.Name, Limit: lim.Rate, Burst: lim.Burst, Window: lim.Period,
			Remaining: int(min(max(n(2+2*i), 0), int64(lim.Burst))), ResetAfter: reset,
		})
	}
	if req.Daily > 0 {
		d.States = append(d.States, k.dailyState(req.Daily, d.Today))
	}
	return d, nil
}

// Reset forgets the subject's GCRA state for the named limits and its count
// for the current day (the month's count, a usage figure, stays): its next
// request finds every one of those limits full. It also drops this
// replica's cached refusals of the subject; other replicas may refuse it
// from their caches until those expire (docs/operations.md says how long).
func (l *Limiter) Reset(ctx context.Context, subject string, names []string) error {
	req := Request{Subject: subject}
	for _, name := range names {
		req.Limits = append(req.Limits, Limit{Name: name, Rate: 1, Period: 1, Burst: 1})
	}
	if err := req.validate(); err != nil {
		return err
	}
	k := keysFor(l.opts.KeyPrefix, req, l.opts.Now())
	del := append(k.all[:len(req.Limits):len(req.Limits)], k.day)
	if err := l.rdb.Del(ctx, del...).Err(); err != nil {
		return fmt.Errorf("ratelimit: reset: %w", err)
	}
	if l.refused.cache != nil {
		prefix := strings.TrimSuffix(k.day, "day:"+k.now.Format("2006-01-02"))
		for _, id := range l.refused.cache.Keys() {
			if strings.HasPrefix(id.key, prefix) {
				l.refused.cache.Remove(id)
			}
		}
	}
	return nil
}
