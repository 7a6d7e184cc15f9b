package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/wire"
)

// WillReplay reports whether Serve will answer r from a completed call's
// kept outcome (a retry with the same Idempotency-Key), so that the
// operation's rate and quotas need not apply: the operation does not run
// again, and the retry must get the replay, not a refusal. eligible: the
// operation table honors the key on c's procedure. On a nil Step (the step
// off), or when Redis cannot tell, it is false: the call goes through every
// limit.
func (s *Step) WillReplay(ctx context.Context, r *http.Request, c wire.Call, subject string, eligible bool) bool {
	if s == nil || c.Streaming || !eligible || len(r.Header[HeaderKey]) == 0 {
		return false
	}
	done, err := s.Completed(ctx, r, c, subject)
	return err == nil && done
}

// Completed reports whether r's Idempotency-Key already holds the outcome
// of a completed call (its kept answer, or that it was too large to keep):
// Serve will then answer r from it without forwarding anything, so the
// chain need not apply the limits of running the operation (its rate, its
// quotas) to r. It looks only: it reserves nothing, and it says false for a
// missing or invalid key and for a call still in flight. One Redis call,
// bounded by Timeout.
func (s *Step) Completed(ctx context.Context, r *http.Request, c wire.Call, subject string) (bool, error) {
	key, ok := parseKey(r.Header[HeaderKey])
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.store.timeout)
	defer cancel()
	state, err := s.store.rdb.HGet(ctx, s.keyPrefix+entryKey(subject, c.Procedure, key), "state").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, err
	}
	return state == "done" || state == "too_large", nil
}

// Keys counts the Idempotency-Key entries subject holds now (in flight or
// kept for the TTL), for the operator API: what its ledger bounds by
// MaxKeysPerSubject.
func (s *Step) Keys(ctx context.Context, subject string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.store.timeout)
	defer cancel()
	ledger := ledgerKey(s.keyPrefix + entryKey(subject, "", ""))
	n, err := s.store.rdb.ZCount(ctx, ledger, "("+strconv.FormatInt(s.store.now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("count idempotency keys: %w", err)
	}
	return n, nil
}
