package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
// works; a done or too_large entry lives for the TTL. Each script touches
// that one key, so it runs on a cluster as on one server.

// reserveScript takes the key if it is free, or says what holds it.
//
// KEYS[1] the entry. ARGV: lease token, fingerprint, content type, lease (ms).
// Returns {"reserved"}, {"other_content_type", ct}, {"reused"}, {"in_use"},
// {"too_large", code} or {"done", status, header, trailer, body}.
var reserveScript = redis.NewScript(`
local key = KEYS[1]
local e = redis.call('HMGET', key, 'state', 'fp', 'ct')
if not e[1] then
  redis.call('HSET', key, 'state', 'in_flight', 'token', ARGV[1], 'fp', ARGV[2], 'ct', ARGV[3])
  redis.call('PEXPIRE', key, ARGV[4])
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

// renewScript extends the lease, if it is still ours. KEYS[1] the entry;
// ARGV: lease token, lease (ms). Returns 1, or 0 when the lease is lost.
var renewScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)

// completeScript replaces our reservation with the outcome, for the TTL.
// KEYS[1] the entry; ARGV: lease token, TTL (ms), state, code, status,
// header, trailer, body. Returns 1, or 0 when the lease is lost.
var completeScript = redis.NewScript(`
local key = KEYS[1]
if redis.call('HGET', key, 'token') ~= ARGV[1] then
  return 0
end
redis.call('HDEL', key, 'token')
redis.call('HSET', key, 'state', ARGV[3], 'code', ARGV[4], 'status', ARGV[5], 'header', ARGV[6], 'trailer', ARGV[7], 'body', ARGV[8])
redis.call('PEXPIRE', key, ARGV[2])
return 1
`)

// releaseScript frees our reservation, so that a retry runs. KEYS[1] the
// entry; ARGV: lease token. Returns 1, or 0 when the lease was lost.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
`)

// store runs the scripts, each call bounded by timeout.
type store struct {
	rdb     redis.UniversalClient
	timeout time.Duration
}

// verdictKind is what reserve found.
type verdictKind int

const (
	reserved verdictKind = iota
	otherContentType
	reused
	inUse
	tooLarge
	done
)

type verdict struct {
	kind verdictKind
	ct   string   // otherContentType: the first request's
	code string   // tooLarge: the first call's outcome
	resp response // done
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
	vals, err := reserveScript.Run(ctx, s.rdb, []string{key}, token, fp, ct, lease.Milliseconds()).StringSlice()
	if err != nil {
		return verdict{}, fmt.Errorf("reserve: %w", err)
	}
	if len(vals) == 0 {
		return verdict{}, errReply
	}
	switch vals[0] {
	case "reserved":
		return verdict{kind: reserved}, nil
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
	n, err := renewScript.Run(ctx, s.rdb, []string{key}, token, lease.Milliseconds()).Int()
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
	n, err := completeScript.Run(ctx, s.rdb, []string{key}, token, ttl.Milliseconds(), state, code, status, header, trailer, body).Int()
	if err != nil {
		return false, fmt.Errorf("complete: %w", err)
	}
	return n == 1, nil
}

func (s *store) release(ctx context.Context, key, token string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := releaseScript.Run(ctx, s.rdb, []string{key}, token).Err(); err != nil {
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
