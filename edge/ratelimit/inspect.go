package ratelimit

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Peek reports the standing of every limit of req and the subject's
// counts, as Allow would see them, without consuming or writing anything:
// for an operator inspecting one subject. It runs Allow's script at cost 0,
// directly, outside the circuit breaker, within ctx's deadline. The
// refusal cache plays no part. Decision.Policy is the Request.Policy of the
// subject's last admitted request; it is kept as long as the subject's
// counts (until a day after the month of its last admitted request).
func (l *Limiter) Peek(ctx context.Context, req Request) (Decision, error) {
	req.Cost = 1
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	req.Cost = 0
	k := keysFor(l.opts.KeyPrefix, req, l.opts.Now())
	v, err := allowScript.Run(ctx, l.rdb, k.script, k.args(req)...).Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: peek: %w", err)
	}
	if len(v) != 5+4*len(req.Limits) {
		return Decision{}, fmt.Errorf("ratelimit: peek answered %d values for %d limits", len(v), len(req.Limits))
	}
	policy, _ := v[len(v)-1].(string)
	ints := make([]int64, len(v)-1)
	for i := range ints {
		var ok bool
		if ints[i], ok = v[i].(int64); !ok {
			return Decision{}, fmt.Errorf("ratelimit: peek answered %T for value %d, not an integer", v[i], i+1)
		}
	}
	d, err := decode(req, k, ints)
	if err != nil {
		return Decision{}, err
	}
	d.Allowed, d.Refused, d.RetryAfter, d.Policy = true, "", 0, policy
	for i := range d.States {
		d.States[i].Remaining = min(max(d.States[i].Remaining, 0), d.States[i].Burst)
	}
	return d.Decision, nil
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
	// The state is in the subject's hash and, from before it, in keys of
	// their own (allow.lua).
	fields := []string{k.dayField}
	for _, name := range names {
		fields = append(fields, "t:"+name)
	}
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, append([]string{k.day}, k.script[scriptSubjectKeys:]...)...) // the older layout's day and TATs
		p.HDel(ctx, k.hash, fields...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ratelimit: reset: %w", err)
	}
	if l.refused.cache != nil {
		for _, key := range l.refused.cache.Keys() {
			if strings.HasPrefix(key, k.prefix) {
				l.refused.cache.Remove(key)
			}
		}
	}
	return nil
}
