// Package quota holds, in Redis, what a subject has open or has used, so
// that every edge replica enforces one limit together:
//
//   - Streams: concurrent-stream leases (WatchEnvironment), renewed while a
//     stream is open, so that a crashed edge frees its slots within one lease
//     period.
//   - Environments: environment quotas (concurrent, per calendar month) and
//     compute quotas (vCPU-hours and memory GB-hours per calendar month),
//     reserved before CreateEnvironment is forwarded, confirmed or rolled
//     back by the backend's answer, released on DeleteEnvironment and forced
//     deletes (ReleaseAll), and reconciled with the backend's truth both
//     ways (Reconcile: released when the backend no longer has them,
//     adopted when it has them and Redis does not).
//
// Each decision is one Lua script, run on the slot of the subject's keys:
// the scripts are the algorithm, the Go code passes arguments and decodes
// results. The numbers (plan quotas, environment size) come from the caller's
// configuration; this package neither reads config nor writes API errors: it
// returns ErrStreamLimit, *QuotaError and ErrUnavailable, which the caller
// maps to resource_exhausted (with a google.rpc.QuotaFailure) or through its
// Redis outage policy.
//
// It is not a rate limiter (requests per minute or day live elsewhere) and
// it does not stop environments that outrun a compute quota: it refuses the
// next one.
//
// # Keys
//
// Keys of one subject share a hash tag, the first 32 hex digits of the
// SHA-256 of the subject (so that no "{" or "}" in a subject can move them):
//
//	q:{tag}:streams        sorted set: lease id → expiry (ms, Redis clock)
//	q:{tag}:envs:pending   sorted set: reservation id → expiry (ms, edge clock)
//	q:{tag}:envs:running   hash: environment id → "start_ms vcpu_milli mem_milli"
//	q:{tag}:envs:2026-11   hash: created, vcpu, mem (this month's count and
//	                       the usage of environments closed in it)
//	q:owner:<environment>  string: the subject that owns a running environment
//	q:envs:index           sorted set: tags of subjects with running
//	                       environments (score bumped on each confirmation
//	                       and adoption)
//	q:envs:reconciling     string: the lease of the last reconciliation pass
//
// Every key expires: leases and reservations with their period, the month's
// counters five weeks after the month, running records (and their owners and
// the index) DefaultRecordTTL after the last confirmation or reconciliation
// pass that saw them alive.
//
// Compute is counted in milli-units × seconds (a 2 vCPU environment for one
// hour is 7,200,000 vCPU units), integers that Lua's doubles hold exactly.
//
// # Deadlines
//
// Every Redis call gets a deadline (Options.Timeout, default 50ms). go-redis
// applies a context's deadline to socket reads and writes only when the
// client has ContextTimeoutEnabled; otherwise its ReadTimeout and
// WriteTimeout bound them.
package quota

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrUnavailable wraps every failure to reach Redis or run a script: the
// caller answers through its outage policy (fail open or unavailable).
var ErrUnavailable = errors.New("quota: redis unavailable")

// Defaults.
const (
	DefaultTimeout        = 50 * time.Millisecond
	DefaultLeasePeriod    = 30 * time.Second
	DefaultReservationTTL = 60 * time.Second
	// DefaultMaxStreams is the specification's WatchEnvironment limit.
	DefaultMaxStreams = 20
	// monthRetention keeps a month's counters this long after the month
	// ends, for operators; only the current month is ever read.
	monthRetention = 5 * 7 * 24 * time.Hour
	// DefaultRecordTTL bounds how long a running environment's records (its
	// owner and the subject's running set) outlive the last time the edge
	// saw the environment alive: a confirmation, or a reconciliation pass
	// that found it at the backend.
	DefaultRecordTTL = 35 * 24 * time.Hour
)

// Options configure Streams and Environments. A zero field takes its
// default; each field applies to the one that uses it and is ignored by the
// other.
type Options struct {
	// KeyPrefix starts every key, so that several installations (or tests)
	// can share one Redis. It must not contain '{' or '}'.
	KeyPrefix string
	// Timeout bounds each Redis call (default DefaultTimeout, 50ms).
	Timeout time.Duration
	// Logger is where Streams log renewal failures (default slog.Default()).
	Logger *slog.Logger
	// LeasePeriod is how long a stream lease lives without renewal (Streams;
	// default DefaultLeasePeriod, 30s): a crashed edge's streams free
	// themselves within it. Open streams renew every third of it. A period
	// under 3ms takes the default.
	LeasePeriod time.Duration
	// Renewals is told each lease renewal round's outcome (Streams; default
	// none).
	Renewals RenewalObserver
}

// settings are Options with the defaults filled in, and the seams this
// package's tests replace (export_test.go).
type settings struct {
	keyPrefix      string
	timeout        time.Duration
	log            *slog.Logger
	leasePeriod    time.Duration
	ticker         func(time.Duration) (<-chan time.Time, func())
	now            func() time.Time
	reservationTTL time.Duration
	recordTTL      time.Duration
	renewals       RenewalObserver
}

func newSettings(o Options) settings {
	s := settings{
		keyPrefix:      o.KeyPrefix,
		timeout:        DefaultTimeout,
		log:            slog.Default(),
		leasePeriod:    DefaultLeasePeriod,
		ticker:         realTicker,
		now:            time.Now,
		reservationTTL: DefaultReservationTTL,
		recordTTL:      DefaultRecordTTL,
		renewals:       nopRenewalObserver{},
	}
	if o.Timeout > 0 {
		s.timeout = o.Timeout
	}
	if o.Logger != nil {
		s.log = o.Logger
	}
	if o.LeasePeriod >= 3*time.Millisecond {
		s.leasePeriod = o.LeasePeriod
	}
	if o.Renewals != nil {
		s.renewals = o.Renewals
	}
	return s
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// tag is the start of a subject's keys, with their hash tag.
func (o *settings) tag(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return o.keyPrefix + "q:{" + hex.EncodeToString(sum[:16]) + "}:"
}

// call bounds one Redis call by the configured deadline.
func (o *settings) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return f(ctx)
}

// callBulk bounds one pipelined Redis call of a background pass: twenty
// times the per-call deadline, at least a second.
func (o *settings) callBulk(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, max(20*o.timeout, time.Second))
	defer cancel()
	return f(ctx)
}

// redisError wraps err, a failed Redis call, as ErrUnavailable, unless the
// caller gave up (its context ended): that is no outage.
func redisError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("quota: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("quota: %s: %w: %w", op, ErrUnavailable, err)
}
