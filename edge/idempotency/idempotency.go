// Package idempotency is the edge's Idempotency-Key step: the first unary
// call with a key runs, its outcome is kept in Redis, and a duplicate within
// 24 hours gets that outcome again, byte for byte, without reaching the
// backend. It is one step of the edge's chain ([Step.Serve]); the chain
// decides which procedures honor the header (the operation table) and
// answers everything that runs before this step (classification,
// authentication, authorization, limits).
//
// It is not a cache (a key replays one call's outcome to the caller who
// chose the key, nothing else), nor a lock on a resource (two keys are two
// calls), nor an answer to streams.
//
// # The contract with clients
//
// Which calls: unary calls of the procedures the operation table marks
// idempotent (by default every unary method of OrganizationService and
// EnvironmentService that changes something). On other procedures, and on
// streaming calls, the header is ignored: the call runs as if it had none.
//
// The key: the value of one Idempotency-Key field, either a structured-field
// string ("8e03978e-40d5-43e8-bc93-6894a57f9324", with \" and \\ escapes)
// as draft-ietf-httpapi-idempotency-key-header writes it, or the same
// characters bare. After unquoting it is 1-255 printable ASCII characters
// (space to ~); "abc" and abc are the same key. Anything else, or the field
// twice, is invalid_argument with ErrorInfo reason IDEMPOTENCY_KEY_INVALID.
//
// Scope: a key belongs to (subject, procedure, key). The same key sent by
// another subject, or to another procedure, is another key.
//
// The request: a key is bound to the first request sent with it, by a
// fingerprint of the procedure, the content type (the media type without
// parameters; for a Connect GET, its encoding), the query and the body, byte
// for byte. A client retries by sending the same bytes again.
//
//   - First request: the key is reserved (in flight), the call is forwarded,
//     and its outcome is kept for TTL (default 24 hours), counted from when
//     the first answer ended. The first caller sees the live answer.
//   - A duplicate (same key, same fingerprint) after the first ended: the
//     kept answer, status, headers, body and gRPC trailers as the first
//     caller got them, plus the header Idempotent-Replayed: true. Headers
//     that describe the current request rather than the outcome are the
//     current request's, not replayed: Date, X-Request-Id, the rate-limit
//     headers and hop-by-hop headers.
//   - A duplicate while the first is still in flight: aborted (HTTP 409 for
//     Connect unary and JSON callers) with reason IDEMPOTENCY_KEY_IN_USE and
//     a RetryInfo of one second. Retrying later gets the outcome.
//   - The same key with another request (another fingerprint):
//     invalid_argument with reason IDEMPOTENCY_KEY_REUSED.
//   - The same key in another protocol or encoding than the first (JSON
//     first, gRPC later): also invalid_argument, IDEMPOTENCY_KEY_REUSED, with
//     a message and ErrorInfo metadata "first_content_type" naming the first
//     request's content type. The outcome is not re-encoded for the other
//     protocol: the kept answer is bytes in the first protocol, and
//     re-encoding errors and trailers across protocols would be a second,
//     subtly different answer. Since the content type is part of the
//     fingerprint, this is the honest answer.
//
// Which outcomes are kept: success, and the errors that say the operation
// did not and will not run as sent, so that running it again would answer
// the same: invalid_argument, not_found, already_exists,
// permission_denied, failed_precondition, out_of_range, unimplemented. The
// others are transient or say nothing about whether the operation ran, and
// are not kept: the key is released and a retry runs the call again.
// These are unavailable, deadline_exceeded, internal, unknown, data_loss,
// resource_exhausted, aborted, canceled and unauthenticated (the backend's
// verdict on the credential, which a retry with a fresh token must be
// able to change). So are the edge's own answers from the proxy (the backend
// unreachable, UPSTREAM_UNAVAILABLE; the deadline passed), answers cut short
// (the backend connection went away mid-answer), and gRPC answers that end
// without a status.
//
// A caller that leaves does not release its key. Once forwarded, a keyed call
// runs to its end within its own deadline even if the caller hangs up or
// cancels (the edge does not cancel the backend's call): the edge holds the
// whole answer, keeps it, and the caller's retry with the same key gets the
// replay instead of running the operation a second time. While the first call
// still runs, the retry gets aborted (IDEMPOTENCY_KEY_IN_USE, retry after one
// second). The edge's refusals before this step
// (authentication, authorization, limits) never reserve a key at all.
//
// Answers too large to keep: an answer whose body, headers and trailers
// together pass MaxResponseBytes (default 1 MiB) goes to the first caller
// whole, and the key keeps, for the TTL, only that the call ended and with
// which code. A duplicate then gets failed_precondition with reason
// IDEMPOTENCY_RESPONSE_NOT_STORED (ErrorInfo metadata "first_code"): the
// operation is never run a second time for it, and the client reads the
// result with the API's Get or List methods, or sends a new key to run it
// again. Transient outcomes are released whatever their size.
//
// Compression: on a call with a key, the edge asks the backend for an
// uncompressed answer (it removes Accept-Encoding, Connect-Accept-Encoding
// and Grpc-Accept-Encoding), so that the kept answer reads the same to
// every duplicate whatever it accepts.
//
// # Guarantees and their limits
//
// Fifty simultaneous requests with one key run the operation once: one
// reserves the key, the others get aborted, or the replay once the first
// has ended. The first caller's answer ends (its last byte, its HTTP/2
// stream, its chunked body) only after the outcome is recorded, so a
// duplicate sent once the first caller has its whole answer gets the
// replay, never aborted. Exactly once holds as long as the edge that forwards the first
// request lives to record its outcome. It does not hold in these windows,
// in which a retry may run the operation a second time:
//
//   - The edge dies (or loses Redis) while the backend works or before it
//     records the outcome: the reservation stays in flight until its lease
//     expires (Lease, default 60 s; the edge renews it every Lease/3 while
//     the backend works), so duplicates get aborted for up to one lease, and
//     a retry after that runs the operation again.
//   - The backend's answer is cut short, or is transient (above): the key is released
//     at once, and whether the backend had already done the work is not
//     known to the edge. The backend's own checks (already_exists for a
//     taken name) are the remaining guard.
//   - A key older than TTL is forgotten.
//
// # Operating it
//
// Redis holds one hash per key: idem:{<tag>}:<id>, where <tag> is a hex
// SHA-256 prefix of the subject (a Redis Cluster hash tag: every key of a
// subject is on one slot) and <id> a SHA-256 of subject, procedure and key.
// Its fields: state (in_flight, done or too_large), the lease token while
// in flight, the fingerprint and content type, and once done the code,
// status, headers, trailers (JSON) and body (raw). Lua scripts reserve
// (create with the lease, or return what is there), renew and release
// (only while the lease token is still ours) and complete (replace our
// reservation with the outcome and the TTL). Memory: up to MaxResponseBytes
// and a few hundred bytes per key used in the last TTL.
//
// Redis unreachable, or slower than Timeout (default 50 ms per call): by
// default the call is refused with unavailable and reason
// IDEMPOTENCY_UNAVAILABLE, since forwarding would silently drop the promise
// of running the call once; a client retries it with the same key. With
// FailOpen the call is forwarded without idempotency instead. Either way
// the outcome is [Unavailable] and the failure is logged at most once per
// ten seconds. If Redis fails after the backend answered, the caller still
// gets the answer; the reservation then expires with its lease (above).
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/wire"
)

// Header names.
const (
	// HeaderKey is the request header that carries the key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed marks a replayed answer.
	HeaderReplayed = "Idempotent-Replayed"
)

// Reasons of the errors this step answers (ErrorInfo, domain "edge").
const (
	ReasonInvalid     = "IDEMPOTENCY_KEY_INVALID"
	ReasonInUse       = "IDEMPOTENCY_KEY_IN_USE"
	ReasonReused      = "IDEMPOTENCY_KEY_REUSED"
	ReasonNotStored   = "IDEMPOTENCY_RESPONSE_NOT_STORED"
	ReasonUnavailable = "IDEMPOTENCY_UNAVAILABLE"
	// ReasonKeysExhausted: the subject holds the most keys it may.
	ReasonKeysExhausted = "IDEMPOTENCY_KEYS_EXHAUSTED"
	// ReasonExpired: a call admitted as a replay whose kept outcome expired
	// before the replay (Serve's replayOnly).
	ReasonExpired = "IDEMPOTENCY_KEY_EXPIRED"
)

// Outcome is what the step did with a call, for metrics and spans.
type Outcome string

// Outcomes. Serve returns "" for a call without the header or to which it
// does not apply.
const (
	// First: the call was forwarded and its outcome kept for duplicates
	// (the answer itself, or that it was too large to keep).
	First Outcome = "first"
	// Replayed: a duplicate got the kept answer.
	Replayed Outcome = "replayed"
	// InUse: a duplicate came while the first was in flight (aborted).
	InUse Outcome = "in_use"
	// Reused: the key came with another request (invalid_argument).
	Reused Outcome = "reused"
	// NotStored: nothing is kept for the key, and a retry runs: the call was
	// forwarded and its outcome was transient, cut short or not recorded
	// (Redis failed), or its body could not be read whole.
	NotStored Outcome = "not_stored"
	// TooLarge: a duplicate of a call whose answer was too large to keep
	// (failed_precondition).
	TooLarge Outcome = "too_large"
	// Invalid: the header's value is not a key (invalid_argument).
	Invalid Outcome = "invalid"
	// KeysExhausted: a new key of a subject that holds the most keys it
	// may (resource_exhausted); the call did not run.
	KeysExhausted Outcome = "keys_exhausted"
	// Unavailable: Redis failed; the call was refused (unavailable), or
	// forwarded without idempotency under FailOpen.
	Unavailable Outcome = "unavailable"
)

// DefaultMaxKeysPerSubject is how many keys one subject holds at once by
// default: with answers of about 1 KB, about 10 MB of Redis per subject.
const DefaultMaxKeysPerSubject = 10000

// Options configure a Step. Zero values take the defaults.
type Options struct {
	// TTL is how long a key is honored after the first answer. Default 24h.
	TTL time.Duration
	// Lease is how long a reservation outlives an edge that stops renewing
	// it; the edge renews it every Lease/3. Default 60s; at least a few
	// Redis round trips.
	Lease time.Duration
	// MaxResponseBytes bounds a kept answer (body, headers and trailers).
	// Default 1 MiB.
	MaxResponseBytes int
	// MaxRequestBytes bounds the body read for the fingerprint; a larger one
	// is refused with resource_exhausted. Default 4 MiB.
	MaxRequestBytes int64
	// MaxKeysPerSubject bounds the keys one subject holds at once (in
	// flight or kept for the TTL); a new key past it is refused with
	// resource_exhausted (ReasonKeysExhausted) until the oldest expires.
	// Default DefaultMaxKeysPerSubject; negative: no bound.
	MaxKeysPerSubject int
	// Timeout bounds each Redis call. Default 50ms.
	Timeout time.Duration
	// OnRedisFailure is config.FailOpen to forward calls without
	// idempotency while Redis fails; anything else (the default) refuses
	// them with unavailable.
	OnRedisFailure config.FailureMode
	// Logger, default slog.Default().
	Logger *slog.Logger
	// KeyPrefix starts every key, so that several installations (or tests)
	// can share one Redis. It must not contain '{' or '}'.
	KeyPrefix string
}

// Step is the idempotency step. It is safe for concurrent use.
type Step struct {
	store       store
	ttl, lease  time.Duration
	maxResponse int
	maxRequest  int64
	failOpen    bool
	log         *slog.Logger
	keyPrefix   string

	mu         sync.Mutex // guards the Redis-failure log's throttle
	lastLog    time.Time
	suppressed int
}

// New returns a step keeping its state in client (one Redis or a cluster).
func New(client redis.UniversalClient, opts Options) *Step {
	s := &Step{
		store: store{rdb: client, timeout: or(opts.Timeout, 50*time.Millisecond), now: time.Now,
			most: max(or(opts.MaxKeysPerSubject, DefaultMaxKeysPerSubject), 0), ttl: or(opts.TTL, 24*time.Hour)},
		ttl:         or(opts.TTL, 24*time.Hour),
		lease:       or(opts.Lease, 60*time.Second),
		maxResponse: or(opts.MaxResponseBytes, 1<<20),
		maxRequest:  or(opts.MaxRequestBytes, 4<<20),
		failOpen:    opts.OnRedisFailure == config.FailOpen,
		log:         opts.Logger,
		keyPrefix:   opts.KeyPrefix,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

func or[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Serve handles one call that may carry Idempotency-Key; next forwards it
// to the backend. c is the call's classification, subject the caller's, and
// eligible whether the operation table honors the header on c's procedure.
// Without the header, or when it does not apply, Serve just calls next and
// returns "". It writes the answers it gives in place of the backend (a
// replay) to w, and returns its refusals for the chain to write (call.Refuse)
// with the call's result; it must be called before anything is written to
// w.
//
// replayOnly: the chain admitted the call as a replay (WillReplay), without
// the limits of running it; should the kept outcome have expired
// meanwhile, the call must not run without them, so Serve refuses it
// (aborted, retryable: the retry runs through every limit) instead of
// forwarding it.
//
// When it forwards a call with a key, next gets r with its body read into
// memory (up to MaxRequestBytes, r.ContentLength set) and without the
// headers by which a client accepts a compressed answer.
func (s *Step) Serve(w http.ResponseWriter, r *http.Request, c wire.Call, subject string, eligible, replayOnly bool, next http.Handler) (Outcome, *connect.Error) {
	values := r.Header[HeaderKey] // HeaderKey is canonical
	if len(values) == 0 || !eligible || c.Streaming {
		next.ServeHTTP(w, r)
		return "", nil
	}
	key, ok := parseKey(values)
	if !ok {
		return Invalid, apierror.New(connect.CodeInvalidArgument, ReasonInvalid,
			fmt.Sprintf("%s must be one value of 1-%d printable ASCII characters, bare or as a quoted string", HeaderKey, maxKeyLen))
	}
	if r.ContentLength > s.maxRequest {
		return NotStored, s.requestTooLarge()
	}
	body, err := readBody(r, s.maxRequest)
	switch {
	case errors.Is(err, errTooLarge):
		return NotStored, s.requestTooLarge()
	case err != nil:
		// The chain's own bound, or the client gone. The backend will never
		// see a whole request, so nothing runs: let the chain answer the
		// error as it would without this step.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		next.ServeHTTP(w, r)
		return NotStored, nil
	}

	ct := contentType(r)
	entry := s.keyPrefix + entryKey(subject, c.Procedure, key)
	token := newToken()
	v, err := s.store.reserve(r.Context(), entry, token, fingerprint(c.Procedure, ct, r.URL.RawQuery, body), ct, s.lease)
	if err != nil {
		if r.Context().Err() != nil {
			return NotStored, nil // the client left; nobody reads an answer
		}
		s.redisFailed("reserve", err)
		if !s.failOpen {
			return Unavailable, apierror.New(connect.CodeUnavailable, ReasonUnavailable,
				"the edge cannot honor "+HeaderKey+" right now; retry the call with the same key later", apierror.WithRetryAfter(time.Second))
		}
		next.ServeHTTP(w, r)
		return Unavailable, nil
	}
	switch v.kind {
	case reserved:
		if replayOnly {
			s.release(context.WithoutCancel(r.Context()), entry, token)
			return NotStored, apierror.New(connect.CodeAborted, ReasonExpired,
				"the kept outcome of this "+HeaderKey+" expired meanwhile; retry the call", apierror.WithRetryAfter(time.Second))
		}
		return s.forward(w, r, c, entry, token, next), nil
	case full:
		wait := max(time.Until(v.free).Round(time.Second), time.Second)
		return KeysExhausted, apierror.New(connect.CodeResourceExhausted, ReasonKeysExhausted,
			fmt.Sprintf("this caller holds the most %s keys the edge keeps at once (%d, each for %v); retry when the oldest expires, or send the call without a key",
				HeaderKey, s.store.most, s.ttl), apierror.WithRetryAfter(wait), apierror.WithMetadata("limit", strconv.Itoa(s.store.most)))
	case inUse:
		return InUse, apierror.New(connect.CodeAborted, ReasonInUse,
			"a request with this "+HeaderKey+" is still in progress; retry later to get its outcome", apierror.WithRetryAfter(time.Second))
	case otherContentType:
		return Reused, apierror.New(connect.CodeInvalidArgument, ReasonReused,
			fmt.Sprintf("this %s was first used with content type %s; repeat the request the same way, or use a new key", HeaderKey, v.ct),
			apierror.WithMetadata("first_content_type", v.ct))
	case reused:
		return Reused, apierror.New(connect.CodeInvalidArgument, ReasonReused,
			"this "+HeaderKey+" was already used for a different request; use a new key for a new request")
	case tooLarge:
		return TooLarge, apierror.New(connect.CodeFailedPrecondition, ReasonNotStored,
			fmt.Sprintf("the request with this %s already completed (%s), but its response was too large to keep and cannot be replayed; read the result, or use a new key to run the request again", HeaderKey, v.code),
			apierror.WithMetadata("first_code", v.code))
	default:
		replay(w, &v.resp)
		return Replayed, nil
	}
}

// forward runs the first request of a key and records its outcome.
func (s *Step) forward(w http.ResponseWriter, r *http.Request, c wire.Call, entry, token string, next http.Handler) Outcome {
	for _, h := range wire.CompressionHeaders {
		r.Header.Del(h)
	}
	// Redis calls after the backend answered must run even if the client
	// has left: the outcome is what a retry needs.
	ctx := context.WithoutCancel(r.Context())
	stop := s.keepLease(ctx, entry, token)
	settled := false
	defer func() {
		stop()
		if !settled {
			// next panicked (the proxy aborts an answer cut short so): what
			// the backend did is unknown, and the client got no whole answer.
			s.release(ctx, entry, token)
		}
	}()

	// Once forwarded, the call runs to its end even if its caller leaves
	// (within the call's own deadline): the edge then holds the whole
	// answer and keeps it, and the caller's retry gets the replay instead
	// of running the operation a second time.
	fwd := ctx
	if deadline, ok := r.Context().Deadline(); ok {
		var cancel context.CancelFunc
		fwd, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	cw := newCapture(w, s.maxResponse, c)
	next.ServeHTTP(cw, r.WithContext(fwd))
	cw.finish()
	stop()
	settled = true
	// Only once the outcome is recorded or released may the answer end.
	defer cw.end()

	code, end := cw.result(c)
	if end == wire.CutShort || end == wire.Whole && !kept(code) {
		s.release(ctx, entry, token)
		return NotStored
	}
	// Kept: the answer itself when it fits, else only how the call ended,
	// so that a duplicate never runs the call again because of the bound.
	name := "unknown"
	var resp *encoded
	if end == wire.Whole {
		name = wire.CodeName(code)
		if !cw.over {
			if e, err := encodeResponse(stored(cw.snap), cw.trailer, cw.body.Bytes()); err == nil && e.size() <= s.maxResponse {
				resp = e
			}
		}
	}
	ok, err := s.store.complete(ctx, entry, token, s.ttl, name, cw.status, resp)
	switch {
	case err != nil:
		s.redisFailed("complete", err)
		return NotStored
	case !ok:
		s.log.Warn("idempotency lease lost before the outcome was recorded; a retry may run the call again",
			"procedure", c.Procedure, "lease", s.lease)
		return NotStored
	}
	return First
}

// kept reports whether an outcome is recorded for duplicates: success, and
// the errors that say the call does not and will not run as sent.
func kept(code connect.Code) bool {
	switch code {
	case wire.OK, connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeAlreadyExists,
		connect.CodePermissionDenied, connect.CodeFailedPrecondition, connect.CodeOutOfRange, connect.CodeUnimplemented:
		return true
	}
	return false
}

// keepLease renews the reservation every lease/3 until stop is called.
func (s *Step) keepLease(ctx context.Context, entry, token string) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(s.lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			ok, err := s.store.renew(ctx, entry, token, s.lease)
			switch {
			case err != nil:
				s.redisFailed("renew", err)
			case !ok:
				s.log.Warn("idempotency lease lost while the backend works; a duplicate may run the call again", "lease", s.lease)
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
		})
	}
}

func (s *Step) release(ctx context.Context, entry, token string) {
	if err := s.store.release(ctx, entry, token); err != nil {
		s.redisFailed("release", err)
	}
}

// redisFailed logs a Redis failure, at most once per logInterval, with
// the number of failures it stands for.
func (s *Step) redisFailed(op string, err error) {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.lastLog) < logInterval {
		s.suppressed++
		s.mu.Unlock()
		return
	}
	n := s.suppressed + 1
	s.lastLog, s.suppressed = now, 0
	s.mu.Unlock()
	s.log.Warn("idempotency: Redis failed", "op", op, "err", err, "failures", n, "fail_open", s.failOpen)
}

const logInterval = 10 * time.Second

func (s *Step) requestTooLarge() *connect.Error {
	return apierror.New(connect.CodeResourceExhausted, "REQUEST_TOO_LARGE",
		fmt.Sprintf("request body larger than %d bytes", s.maxRequest),
		apierror.WithMetadata("limit_bytes", strconv.FormatInt(s.maxRequest, 10)))
}

var errTooLarge = errors.New("idempotency: request body too large")

// readBody reads the whole body, up to max bytes, and puts the bytes back
// for next to forward.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return body, err
	}
	if int64(len(body)) > max {
		return nil, errTooLarge
	}
	_ = r.Body.Close()
	r.ContentLength = int64(len(body))
	if len(body) == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
