// Package ratelimit decides whether the edge admits a request under its
// subject's rate limits: GCRA rates (the plan's, an operation's) with
// go-redis/redis_rate's semantics, and a fixed UTC-day cap. Every limit that
// applies to a request is checked and consumed together, in one Redis round
// trip, so that a request refused by any limit consumes none.
//
// The numbers are the caller's (plans are config). The package also counts
// each subject's admitted requests per day and month, for usage reports.
//
// When Redis does not answer, a circuit breaker stops waiting for it and a
// policy decides: FailOpen (each replica admits its share of each limit on its
// own) or FailClosed (ErrUnavailable).
//
// It is not for concurrency limits (stream leases) or quotas that are
// reserved and released (environments, compute).
package ratelimit

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/redis/go-redis/v9"
)

//go:embed allow.lua
var allowLua string

// allowScript runs with EVALSHA, falling back to EVAL when Redis lacks it.
var allowScript = redis.NewScript(allowLua)

// DailyName is the name under which the daily cap appears in a Decision.
const DailyName = "daily"

// Sources of a Decision.
const (
	SourceRedis    = "redis"       // decided by the script
	SourceCache    = "local-cache" // refused again from a refusal Redis made earlier
	SourceFailOpen = "fail-open"   // decided by this replica's local limiter while Redis failed
)

// ErrUnavailable is returned by Allow under FailClosed, and by Usage, when
// Redis does not answer. Callers map it to the code unavailable.
var ErrUnavailable = errors.New("ratelimit: redis unavailable")

// Limit is a GCRA rate: Rate requests per Period on average, up to Burst at
// once. Name identifies the limit within a subject (for example "plan" or
// "op:CreateEnvironment"); it is part of the Redis key, so one name must keep
// one meaning.
type Limit struct {
	Name   string
	Rate   int
	Period time.Duration
	Burst  int
}

// Request is one request's claim on its subject's limits.
type Request struct {
	// Subject is whose limits these are (API key, user); any string.
	Subject string
	// SubjectSum, when not zero, is SHA-256 of Subject, computed once by the
	// caller (per verified token) so that each call need not.
	SubjectSum [32]byte
	// Limits are checked and consumed together.
	Limits []Limit
	// Daily caps the subject's requests per UTC day of the edge's clock;
	// 0 means no cap (the day is still counted).
	Daily int
	// Cost is how much the request consumes of each limit; 0 means 1.
	Cost int
	// Policy names what the request is charged under (the edge: its
	// plan). An admitted request records it with the subject's state, for
	// Peek; empty records nothing.
	Policy string
}

// Decision is the answer for one request.
type Decision struct {
	Allowed bool
	// Refused names the limit that refused (DailyName for the daily cap): of
	// those that refused, the one that frees last. Empty when allowed.
	Refused string
	// RetryAfter is, when refused, the earliest time after which a retry can
	// pass every limit that refused it. For the daily cap that is the next
	// UTC midnight. Zero when allowed.
	RetryAfter time.Duration
	// States has one entry per limit, in the request's order, then one for
	// the daily cap when there is one. From the refusal cache it holds only
	// the refusing limits; under FailOpen, Remaining and ResetAfter are this
	// replica's local share.
	States []State
	// Source says who decided: SourceRedis, SourceCache or SourceFailOpen.
	Source string
	// Today and Month are the subject's admitted cost in the current UTC
	// day and month, this request included when allowed. Zero unless Source
	// is SourceRedis.
	Today, Month int64
	// Policy is, from Peek only, the Request.Policy of the subject's last
	// admitted request, if it had one that day or the day before (see
	// Peek).
	Policy string
	// charged is what Redis counted of an admitted request, for Refund.
	charged charge
}

// State is one limit's standing after a decision, for rate limit headers.
type State struct {
	Name string
	// Limit requests per Window; Burst may be admitted at once (for the
	// daily cap, Burst equals Limit).
	Limit  int
	Burst  int
	Window time.Duration
	// Remaining is how many more requests the limit would admit right now
	// (up to Burst).
	Remaining int
	// ResetAfter is when the limit is back to full (for the daily cap, the
	// next UTC midnight).
	ResetAfter time.Duration
}

// Options tune a Limiter. The zero value is usable.
type Options struct {
	// Timeout bounds every Redis call (default 50ms). Allow returns by then
	// even when the client ignores context deadlines; set the client's
	// ContextTimeoutEnabled so that it also frees the connection.
	Timeout time.Duration
	// Policy applies while Redis does not answer (default FailOpen).
	OnRedisFailure config.FailureMode
	// LocalShare is the part of each limit's rate, burst and daily cap that
	// one replica admits by itself under FailOpen (default 0.5).
	LocalShare float64
	// FailureThreshold consecutive failed calls open the circuit breaker
	// (default 5). While open, Allow does not call Redis.
	FailureThreshold int
	// Cooldown is how long the breaker stays open before it lets one probe
	// through (default 5s). The probe's success closes it.
	Cooldown time.Duration
	// LogInterval is the least time between two log lines about a failing
	// Redis, apart from the breaker's changes of state (default 30s).
	LogInterval time.Duration
	// RefusalCache is how many refusals the Limiter remembers, to refuse
	// again without Redis until they expire (default 10,000; negative: none).
	RefusalCache int
	// LocalEntries bounds the number of local limiters kept for FailOpen
	// (default 10,000); the least recently used are dropped.
	LocalEntries int
	// Now is the edge's clock, for the daily window, the caches and the
	// breaker (default time.Now). GCRA uses Redis's clock.
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// KeyPrefix starts every key, so that several installations (or tests)
	// can share one Redis. It must not contain '{' or '}'.
	KeyPrefix string
}

// Limiter is safe for concurrent use. Several Limiters (replicas) sharing one
// Redis admit together what one would.
type Limiter struct {
	rdb     redis.UniversalClient
	opts    Options
	breaker breaker
	refused *refusals
	local   *localLimiter
	batch   *batcher
	stats   counters

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

// CacheStats calls yield for each of the Limiter's in-process caches: its
// name, the entries it holds, its bound, and the entries it evicted for room
// since start. "refusal": the refusals remembered (Options.RefusalCache);
// "local_rate" and "local_day": the local limiters and daily counts of
// FailOpen (Options.LocalEntries each).
func (l *Limiter) CacheStats(yield func(name string, entries, bound int, evictions uint64)) {
	if l.refused.cache != nil {
		yield("refusal", l.refused.cache.Len(), l.refused.size, l.refused.evicted.Load())
	}
	yield("local_rate", l.local.rates.Len(), l.local.size, l.local.ratesEvicted.Load())
	yield("local_day", l.local.days.Len(), l.local.size, l.local.daysEvicted.Load())
}

// New returns a Limiter on client, which may be a Redis Cluster client.
func New(client redis.UniversalClient, opts Options) *Limiter {
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if !(opts.LocalShare > 0) { // also NaN
		opts.LocalShare = 0.5
	}
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = 5
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 5 * time.Second
	}
	if opts.LogInterval <= 0 {
		opts.LogInterval = 30 * time.Second
	}
	if opts.RefusalCache == 0 {
		opts.RefusalCache = 10_000
	}
	if opts.LocalEntries <= 0 {
		opts.LocalEntries = 10_000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Limiter{
		rdb:     client,
		opts:    opts,
		breaker: breaker{threshold: opts.FailureThreshold, cooldown: opts.Cooldown},
		refused: newRefusals(opts.RefusalCache),
		local:   newLocalLimiter(opts.LocalShare, opts.LocalEntries),
		batch:   newBatcher(client, opts.Timeout),
	}
}

// Allow decides req and, when it is allowed, consumes it from every limit.
// The error is ErrUnavailable (wrapped) under FailClosed when Redis does not
// answer, the context's error when ctx ends first, or a description of an
// invalid request; a refusal is a Decision, not an error.
func (l *Limiter) Allow(ctx context.Context, req Request) (Decision, error) {
	if req.Cost == 0 {
		req.Cost = 1
	}
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	now := l.opts.Now()
	k := keysFor(l.opts.KeyPrefix, req, now)

	if d, ok := l.refused.decide(req, k, now); ok {
		l.stats.refusedCache.Add(1)
		return d, nil
	}
	var sc *scriptCall
	raw, err := callAsync(l, ctx, func(ctx context.Context, deadline time.Time) <-chan result[[]int64] {
		sc = l.batch.run(ctx, deadline, k.command(req))
		return sc.done
	})
	if err == nil {
		release(sc) // only its answer ends a call without an error
	}
	var v verdict
	if err == nil {
		v, err = decode(req, k, raw)
	}
	switch {
	case err == nil:
		if v.Allowed {
			l.stats.allowedRedis.Add(1)
		} else {
			l.stats.refusedRedis.Add(1)
			l.refused.remember(req, k, v, now)
		}
		return v.Decision, nil
	case ctx.Err() != nil:
		return Decision{}, fmt.Errorf("ratelimit: %w", ctx.Err())
	}
	l.logTrouble(now, err)
	if l.opts.OnRedisFailure == config.FailClosed {
		l.stats.unavailable.Add(1)
		return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	d := l.local.decide(req, k, now)
	if d.Allowed {
		l.stats.allowedFailOpen.Add(1)
	} else {
		l.stats.refusedFailOpen.Add(1)
	}
	return d, nil
}

// Usage is a subject's admitted cost in the current UTC day and month of
// the edge's clock, as counted by Allow.
type Usage struct{ Today, Month int64 }

// Usage reads the subject's counters in one round trip. Requests decided
// while Redis failed are not counted.
func (l *Limiter) Usage(ctx context.Context, subject string) (Usage, error) {
	k := keysFor(l.opts.KeyPrefix, Request{Subject: subject}, l.opts.Now())
	u, err := read(l, ctx, func(ctx context.Context) (Usage, error) {
		// The hash's fields and the older layout's keys, in one round trip.
		var older *redis.SliceCmd
		var counted *redis.SliceCmd
		_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			older = p.MGet(ctx, k.day, k.month)
			counted = p.HMGet(ctx, k.hash, k.dayField, k.monthField)
			return nil
		})
		if err != nil {
			return Usage{}, err
		}
		// A count the hash holds has the older one's in it; without it,
		// the older one is all there is (allow.lua).
		var u Usage
		for i, n := range []*int64{&u.Today, &u.Month} {
			s, ok := counted.Val()[i].(string)
			if !ok {
				s, _ = older.Val()[i].(string)
			}
			*n, _ = strconv.ParseInt(s, 10, 64)
		}
		return u, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return Usage{}, err
	}
	return u, nil
}

func (r *Request) validate() error {
	if r.Subject == "" {
		return errors.New("ratelimit: request without subject")
	}
	if r.Cost < 0 || r.Daily < 0 {
		return fmt.Errorf("ratelimit: negative cost %d or daily cap %d", r.Cost, r.Daily)
	}
	for i, lim := range r.Limits {
		switch {
		case lim.Name == "" || lim.Name == DailyName || lim.Name == policyKey || lim.Name == hashKey ||
			strings.HasPrefix(lim.Name, "day:") || strings.HasPrefix(lim.Name, "month:") || strings.HasPrefix(lim.Name, intervalKey):
			return fmt.Errorf("ratelimit: limit name %q is empty or reserved", lim.Name)
		case slices.ContainsFunc(r.Limits[:i], func(l Limit) bool { return l.Name == lim.Name }):
			return fmt.Errorf("ratelimit: limit %q twice in one request", lim.Name)
		case lim.Rate <= 0 || lim.Period <= 0 || lim.Burst <= 0:
			return fmt.Errorf("ratelimit: limit %q needs a positive rate, period and burst", lim.Name)
		}
	}
	return nil
}

// scriptSubjectKeys is how many of the script's KEYS come before the
// limits' (keys.script): the hash, the older layout's day and month.
const scriptSubjectKeys = 3

// keys are a request's Redis keys and the identities under which the
// in-process tables remember its limits.
type keys struct {
	// The script's KEYS (allow.lua): the subject's hash, the older
	// layout's day and month, then per limit the name of its state (the
	// subject's prefix and the limit's name), its key in that layout.
	script []string
	prefix string // of every key of the subject
	hash   string // the subject's hash (see allow.lua)
	// The older layout's counters, which the script adds to a day the hash
	// has not counted yet; day is also the daily cap's identity in the
	// in-process tables.
	day, month string
	ids        []limitID // per limit: key and numbers
	dayID      limitID
	now        time.Time // on the edge's clock
	// The day's: the hash's fields for it and its month, the oldest of
	// each the hash keeps, the ends of the day and month windows.
	*calendar
	// buf holds script, ids and the call's command when the request has
	// at most inlineLimits limits (nil otherwise): one allocation for
	// them all, not four.
	buf *callBuffers
}

// inlineLimits is how many limits a request may have for its keys and
// command to share one allocation (callBuffers): a plan's and an
// operation's.
const inlineLimits = 2

// callBuffers are the backing arrays of one call's keys and command.
type callBuffers struct {
	script [scriptSubjectKeys + inlineLimits]string
	ids    [inlineLimits]limitID
	args   argValues
	cmd    [3 + scriptSubjectKeys + inlineLimits + 2 + inlineLimits]any // see command
}

// Names of keys beside the limits': the subject's hash, and the older
// layout's (its intervals, its policy charged, its day and month
// counters), which a limit's name must not take either.
const (
	hashKey     = "s"
	intervalKey = "iv:"
	policyKey   = "policy"
)

// keysFor names the subject's keys. They share a hash tag so that one
// request's keys are on one Redis Cluster slot; the tag is a hash of the
// subject, which may hold any character (braces too).
func keysFor(keyPrefix string, req Request, now time.Time) keys {
	sum := req.SubjectSum
	if sum == ([32]byte{}) {
		sum = sha256.Sum256([]byte(req.Subject))
	}
	now = now.UTC()
	c := calendarOf(now)
	// Every key is the subject's prefix and a name: they are written one
	// after the other into one string, and each is a part of it (one
	// allocation for the call's keys, not one per key). The in-process
	// tables, which keep a key for longer, keep a copy of it
	// (strings.Clone), not the whole.
	const tagOpen, tagClose = "rl:{", "}:"
	pn := len(keyPrefix) + len(tagOpen) + 32 + len(tagClose)
	names := [...]string{hashKey, c.dayName, c.monthName}
	n := scriptSubjectKeys * pn
	for _, name := range names {
		n += len(name)
	}
	for _, lim := range req.Limits {
		n += pn + len(lim.Name)
	}
	var b strings.Builder
	b.Grow(n)
	var tag [32]byte
	hex.Encode(tag[:], sum[:16])
	key := func(name string) string {
		from := b.Len()
		b.WriteString(keyPrefix)
		b.WriteString(tagOpen)
		b.Write(tag[:])
		b.WriteString(tagClose)
		b.WriteString(name)
		return b.String()[from:]
	}
	k := keys{now: now, calendar: c}
	if len(req.Limits) <= inlineLimits {
		k.buf = new(callBuffers)
		k.ids, k.script = k.buf.ids[:0:len(req.Limits)], k.buf.script[:0:scriptSubjectKeys+len(req.Limits)]
	} else {
		k.ids, k.script = make([]limitID, 0, len(req.Limits)), make([]string, 0, scriptSubjectKeys+len(req.Limits))
	}
	k.hash, k.day, k.month = key(names[0]), key(names[1]), key(names[2])
	k.prefix = k.hash[:pn]
	// One slice, made here: each call to Redis passes it as it is.
	k.script = append(k.script, k.hash, k.day, k.month)
	for _, lim := range req.Limits {
		key := key(lim.Name)
		k.script = append(k.script, key)
		k.ids = append(k.ids, limitID{key: key, rate: lim.Rate, burst: lim.Burst, period: lim.Period})
	}
	k.dayID = limitID{key: k.day, rate: req.Daily}
	return k
}

// calendar is what keysFor needs of one UTC day, made once a day.
type calendar struct {
	date                   string // YYYY-MM-DD
	dayField, monthField   string
	oldestDay, oldestMonth string
	dayName, monthName     string // of the older layout's counters: day:YYYY-MM-DD, month:YYYY-MM
	// fieldArgs are the four fields above as the script's ARGV[1] (args)
	// holds them, each a JSON string after a comma: written once a day,
	// not on every call.
	fieldArgs       string
	start, midnight time.Time // the day's bounds
	monthEnd        time.Time
}

// lastCalendar is the calendar of the day last asked for.
var lastCalendar atomic.Pointer[calendar]

// calendarOf returns the calendar of now's UTC day.
func calendarOf(now time.Time) *calendar {
	if c := lastCalendar.Load(); c != nil && !now.Before(c.start) && now.Before(c.midnight) {
		return c
	}
	y, m, d := now.Date()
	date := now.Format(time.DateOnly)
	c := &calendar{
		date:        date,
		dayField:    "d:" + date,
		monthField:  "m:" + date[:7],
		dayName:     "day:" + date,
		monthName:   "month:" + date[:7],
		oldestDay:   "d:" + time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC).Format(time.DateOnly),
		oldestMonth: "m:" + time.Date(y, m-1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01"),
		start:       time.Date(y, m, d, 0, 0, 0, 0, time.UTC),
		midnight:    time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC),
		monthEnd:    time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC),
	}
	c.fieldArgs = `,"` + c.dayField + `","` + c.monthField + `","` + c.oldestDay + `","` + c.oldestMonth + `"`
	lastCalendar.Store(c)
	return c
}

// limitID names a limit in the in-process tables: its key, under which
// they hold it, and the numbers they hold it under, so that they can tell
// when those changed.
type limitID struct {
	key         string
	rate, burst int
	period      time.Duration
}

// args are the script's ARGV (see allow.lua). The numbers are written as
// redis_rate passes them (go-redis's formatting), so that the arithmetic
// is the same.
func (k keys) args(req Request) []any {
	return k.appendArgs(make([]any, 0, 2+len(req.Limits)), req)
}

// appendArgs appends args to dst: the call's numbers, the day's fields and
// each limit's emission interval as one JSON array (go-redis writes each
// argument at about 300 instructions, a value appended here costs a tenth
// of that; Redis decodes the array in C, cjson, at less than it spent on
// the arguments), then the policy and each limit's name, as pointers (a
// pointer goes into an interface without an allocation). The numbers are
// formatted as go-redis formatted them (AppendInt, AppendFloat 'f' -1),
// so the script computes with the same doubles.
func (k keys) appendArgs(dst []any, req Request) []any {
	var v *argValues
	if k.buf != nil {
		v = &k.buf.args
	} else {
		v = new(argValues)
	}
	v.policy = req.Policy
	var a [256]byte // one call's numbers, for the usual few limits
	b := strconv.AppendInt(append(a[:0], '['), int64(len(req.Limits)), 10)
	b = appendNumber(b, int64(req.Cost))
	b = appendNumber(b, int64(req.Daily))
	b = appendNumber(b, k.ttl(k.monthEnd, 24*time.Hour))
	b = append(b, k.fieldArgs...) // ,"dayField","monthField","oldestDay","oldestMonth"
	for i := range req.Limits {
		lim := &req.Limits[i]
		b = appendNumber(b, int64(lim.Burst))
		b = appendNumber(b, int64(lim.Rate))
		period := lim.Period.Seconds()
		b = strconv.AppendFloat(append(b, ','), period, 'f', -1, 64)
		// The emission interval as Lua's tostring writes it (%.14g): the
		// script's division gives the same double, and strconv the same
		// digits (TestTheIntervalIsWrittenAsTheScriptWouldWriteIt).
		b = strconv.AppendFloat(append(b, ',', '"'), period/float64(lim.Rate), 'g', 14, 64)
		b = append(b, '"')
	}
	v.packed = string(append(b, ']'))
	dst = append(dst, &v.packed, &v.policy)
	for i := range req.Limits {
		dst = append(dst, &req.Limits[i].Name)
	}
	return dst
}

// appendNumber appends n to the JSON array b, after a comma.
func appendNumber(b []byte, n int64) []byte {
	return strconv.AppendInt(append(b, ','), n, 10)
}

// argValues are what appendArgs points to.
type argValues struct {
	packed, policy string // ARGV[1], ARGV[2]
}

// command is the call's EVALSHA of the script, ready to send: the name and
// hash boxed once, the keys as pointers into k.script.
func (k keys) command(req Request) []any {
	var cmd []any
	if n := 3 + len(k.script) + 2 + len(req.Limits); k.buf != nil {
		cmd = k.buf.cmd[:0:n]
	} else {
		cmd = make([]any, 0, n)
	}
	cmd = append(cmd, evalshaName, allowSHA, len(k.script))
	for i := range k.script {
		cmd = append(cmd, &k.script[i])
	}
	return k.appendArgs(cmd, req)
}

var (
	evalshaName any = "evalsha"
	allowSHA    any = allowScript.Hash()
)

// ttl is how long, in whole seconds, the subject's hash lives: a grace
// period past the end of its window, so that a replica whose clock lags
// still finds it.
func (k keys) ttl(end time.Time, grace time.Duration) int64 {
	return int64(math.Ceil((end.Sub(k.now) + grace).Seconds()))
}

// verdict is a Decision of Redis with, for each of its States, the time
// after which that limit would admit the request again (negative when it
// did not refuse), for the refusal cache. retry is nil when the request
// was allowed: Allow remembers only refusals.
type verdict struct {
	Decision
	retry []time.Duration
}

// decode turns the script's answer into a verdict.
func decode(req Request, k keys, v []int64) (verdict, error) {
	if len(v) != 4+4*len(req.Limits) {
		return verdict{}, fmt.Errorf("ratelimit: script answered %d values for %d limits", len(v), len(req.Limits))
	}
	d := verdict{Decision: Decision{Allowed: v[0] == 1, Source: SourceRedis, Today: v[2], Month: v[3]}}
	// One allocation each, not one per append; retry only for a refusal
	// (an admitted call's limits all admitted it: nothing to remember).
	if states := len(req.Limits) + min(req.Daily, 1); states > 0 {
		d.States = make([]State, 0, states)
		if !d.Allowed {
			d.retry = make([]time.Duration, 0, states)
		}
	}
	if d.Allowed {
		d.charged = charge{prefix: k.prefix, calendar: k.calendar, cost: req.Cost}
	}
	add := func(s State, refused bool, after time.Duration) {
		d.States = append(d.States, s)
		if !refused {
			after = -1
		} else if d.Refused == "" || after > d.RetryAfter {
			d.Refused, d.RetryAfter = s.Name, after
		}
		if d.retry != nil {
			d.retry = append(d.retry, after)
		}
	}
	for i, lim := range req.Limits {
		at := 4 + 4*i
		// Durations come as whole nanoseconds (allow.lua).
		add(State{
			Name: lim.Name, Limit: lim.Rate, Burst: lim.Burst, Window: lim.Period,
			Remaining: int(v[at+1]), ResetAfter: time.Duration(v[at+3]),
		}, v[at] == 1, time.Duration(v[at+2]))
	}
	if req.Daily > 0 {
		add(k.dailyState(req.Daily, d.Today), v[1] == 1, k.midnight.Sub(k.now))
	}
	return d, nil
}

func (k keys) dailyState(limit int, used int64) State {
	return State{
		Name: DailyName, Limit: limit, Burst: limit, Window: 24 * time.Hour,
		Remaining: int(max(0, int64(limit)-used)), ResetAfter: k.midnight.Sub(k.now),
	}
}

// counters back Stats.
type counters struct {
	redisCalls, redisErrors, breakerOpens         atomic.Uint64
	allowedRedis, refusedRedis, refusedCache      atomic.Uint64
	allowedFailOpen, refusedFailOpen, unavailable atomic.Uint64
}
