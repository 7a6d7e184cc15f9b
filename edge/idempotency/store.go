package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// One Redis hash per (subject, procedure, key), at entryKey, with fields:
//
//	state    "in_flight", "done" or "too_large"
//	token    the lease token of the edge that forwards the call (in_flight only)
//	fp       the request's fingerprint
//	ct       the request's content type
//	code     the outcome's code name ("ok", "already_exists", …; done and too_large)
//	status   the HTTP status (done and too_large)
//	header   the response headers, JSON (done)
//	trailer  the response trailers, JSON (done)
//	body     the response body, raw bytes (done)
//
// An in_flight entry lives for the lease and is renewed while the backend
// works; a done or too_large entry lives for the TTL.
//
// Beside a subject's entries, on the same slot (the same hash tag), its
// ledger (ledgerKey): a sorted set of its entries scored by their expiry
// (ms, edge clock), which bounds how many one subject holds at once. Each
// script touches one entry and its subject's ledger, so it runs on a
// cluster as on one server.

// reserveScript takes the key if it is free and its subject holds fewer
// than the most entries it may, or says what holds it.
//
// KEYS[1] the entry, KEYS[2] the subject's ledger. ARGV: lease token,
// fingerprint, content type, lease (ms), now (ms), the most entries a
// subject may hold (0: no bound), TTL (ms).
// Returns {"reserved"}, {"full", expiry of the oldest entry (ms)},
// {"other_content_type", ct}, {"reused"}, {"in_use"}, {"too_large", code}
// or {"done", status, header, trailer, body}.
var reserveScript = redis.NewScript(`
local key = KEYS[1]
local e = redis.call('HMGET', key, 'state', 'fp', 'ct')
if not e[1] then
  local now, most = tonumber(ARGV[5]), tonumber(ARGV[6])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if most > 0 and redis.call('ZCARD', KEYS[2]) >= most then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'full', oldest[2]}
  end
  redis.call('HSET', key, 'state', 'in_flight', 'token', ARGV[1], 'fp', ARGV[2], 'ct', ARGV[3])
  redis.call('PEXPIRE', key, ARGV[4])
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), key)
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[7]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[7])
  end
  return {'reserved'}
end
if e[3] ~= ARGV[3] then
  return {'other_content_type', e[3] or ''}
end
if e[2] ~= ARGV[2] then
  return {'reused'}
end
if e[1] == 'in_flight' then
  return {'in_use'}
end
if e[1] == 'too_large' then
  return {'too_large', redis.call('HGET', key, 'code') or 'unknown'}
end
local r = redis.call('HMGET', key, 'status', 'header', 'trailer', 'body', 'code')
return {'done', r[1] or '', r[2] or '', r[3] or '', r[4] or '', r[5] or ''}
`)

// renewScript extends the lease, if it is still ours. KEYS[1] the entry,
// KEYS[2] the ledger; ARGV: lease token, lease (ms), now (ms). Returns 1,
// or 0 when the lease is lost.
var renewScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', tonumber(ARGV[3]) + tonumber(ARGV[2]), KEYS[1])
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)

// completeScript replaces our reservation with the outcome, for the TTL.
// KEYS[1] the entry, KEYS[2] the ledger; ARGV: lease token, TTL (ms),
// state, code, status, header, trailer, body, now (ms). Returns 1, or 0
// when the lease is lost.
var completeScript = redis.NewScript(`
local key = KEYS[1]
if redis.call('HGET', key, 'token') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', key, 'token')
redis.call('HSET', key, 'state', ARGV[3], 'code', ARGV[4], 'status', ARGV[5], 'header', ARGV[6], 'trailer', ARGV[7], 'body', ARGV[8])
redis.call('PEXPIRE', key, ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[9]) + tonumber(ARGV[2]), key)
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
`)

// releaseScript frees our reservation, so that a retry runs. KEYS[1] the
// entry, KEYS[2] the ledger; ARGV: lease token. Returns 1, or 0 when the
// lease was lost.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('ZREM', KEYS[2], KEYS[1])
return redis.call('DEL', KEYS[1])
`)

// ledgerKey is the ledger of the subject whose entry is entry: the same
// start ("…idem:{tag}:"), which no entry's hex digest can end with.
func ledgerKey(entry string) string {
	return entry[:strings.LastIndexByte(entry, ':')+1] + "ledger"
}

// store runs the scripts, each call bounded by timeout.
type store struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	now     func() time.Time
	// most is how many entries one subject may hold at once; 0: no bound.
	most int
	ttl  time.Duration
}

// verdictKind is what reserve found.
type verdictKind int

const (
	reserved verdictKind = iota
	full
	otherContentType
	reused
	inUse
	tooLarge
	done
)

type verdict struct {
	kind verdictKind
	free time.Time // full: when the subject's oldest entry expires
	ct   string    // otherContentType: the first request's
	code string    // tooLarge: the first call's outcome
	resp response  // done
}

// response is a stored answer.
type response struct {
	status  int
	header  http.Header
	trailer http.Header
	body    []byte
	code    string // the first answer's code name ("ok", "already_exists", …)
}

// errReply means Redis answered something the scripts never return.
var errReply = errors.New("idempotency: unexpected reply from Redis")

func (s *store) reserve(ctx context.Context, key, token, fp, ct string, lease time.Duration) (verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vals, err := reserveScript.Run(ctx, s.rdb, []string{key, ledgerKey(key)}, token, fp, ct, lease.Milliseconds(),
		s.now().UnixMilli(), s.most, s.ttl.Milliseconds()).StringSlice()
	if err != nil {
		return verdict{}, fmt.Errorf("reserve: %w", err)
	}
	if len(vals) == 0 {
		return verdict{}, errReply
	}
	switch vals[0] {
	case "reserved":
		return verdict{kind: reserved}, nil
	case "full":
		if len(vals) == 2 {
			ms, _ := strconv.ParseFloat(vals[1], 64)
			return verdict{kind: full, free: time.UnixMilli(int64(ms))}, nil
		}
	case "other_content_type":
		if len(vals) == 2 {
			return verdict{kind: otherContentType, ct: vals[1]}, nil
		}
	case "reused":
		return verdict{kind: reused}, nil
	case "in_use":
		return verdict{kind: inUse}, nil
	case "too_large":
		if len(vals) == 2 {
			return verdict{kind: tooLarge, code: vals[1]}, nil
		}
	case "done":
		if len(vals) == 6 {
			resp, err := decodeResponse(vals[1], vals[2], vals[3], vals[4])
			if err != nil {
				return verdict{}, err
			}
			resp.code = vals[5]
			return verdict{kind: done, resp: resp}, nil
		}
	}
	return verdict{}, errReply
}

func (s *store) renew(ctx context.Context, key, token string, lease time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := renewScript.Run(ctx, s.rdb, []string{key, ledgerKey(key)}, token, lease.Milliseconds(), s.now().UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("renew: %w", err)
	}
	return n == 1, nil
}

// complete stores the outcome: the whole response when resp is not nil,
// else only that the call ended with code (too large to keep).
func (s *store) complete(ctx context.Context, key, token string, ttl time.Duration, code string, status int, resp *encoded) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	state := "too_large"
	var header, trailer, body string
	if resp != nil {
		state, header, trailer, body = "done", resp.header, resp.trailer, resp.body
	}
	n, err := completeScript.Run(ctx, s.rdb, []string{key, ledgerKey(key)}, token, ttl.Milliseconds(), state, code, status, header, trailer, body,
		s.now().UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("complete: %w", err)
	}
	return n == 1, nil
}

func (s *store) release(ctx context.Context, key, token string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := releaseScript.Run(ctx, s.rdb, []string{key, ledgerKey(key)}, token).Err(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// encoded is a response as the entry holds it.
type encoded struct {
	header, trailer, body string
}

func (e *encoded) size() int { return len(e.header) + len(e.trailer) + len(e.body) }

func encodeResponse(header, trailer http.Header, body []byte) (*encoded, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	t, err := json.Marshal(trailer)
	if err != nil {
		return nil, err
	}
	return &encoded{header: string(h), trailer: string(t), body: string(body)}, nil
}

func decodeResponse(status, header, trailer, body string) (response, error) {
	r := response{body: []byte(body)}
	var err error
	if r.status, err = strconv.Atoi(status); err != nil || r.status < 200 || r.status > 999 {
		return r, fmt.Errorf("%w: status %q", errReply, status)
	}
	if err := json.Unmarshal([]byte(header), &r.header); err != nil {
		return r, fmt.Errorf("%w: header: %v", errReply, err)
	}
	if err := json.Unmarshal([]byte(trailer), &r.trailer); err != nil {
		return r, fmt.Errorf("%w: trailer: %v", errReply, err)
	}
	return r, nil
}
