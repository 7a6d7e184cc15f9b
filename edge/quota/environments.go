package quota

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Quota is a subject's environment and compute quotas per calendar month
// (UTC); 0 means unlimited (policy.QuotaOf makes one of config.Quotas).
type Quota struct {
	ConcurrentEnvironments int
	EnvironmentsPerMonth   int
	VCPUHoursPerMonth      float64
	MemoryGBHoursPerMonth  float64
}

// Bounded reports whether any of the quotas is limited (not 0).
func (q Quota) Bounded() bool {
	return q.ConcurrentEnvironments > 0 || q.EnvironmentsPerMonth > 0 || q.VCPUHoursPerMonth > 0 || q.MemoryGBHoursPerMonth > 0
}

// Size is what one environment counts for compute quotas per hour of its
// lifetime. Its fields are config.EnvironmentSize's.
type Size struct {
	VCPUs    float64
	MemoryGB float64
}

// Usage is a subject's consumption this calendar month (UTC).
type Usage struct {
	// Month is the first instant of the month, UTC.
	Month time.Time
	// Environments are running now (confirmed, not yet released).
	Environments int
	// Created counts this month's reservations, less those rolled back.
	Created int
	// VCPUHours and MemoryGBHours are this month's compute: environments
	// released this month, plus the running ones so far.
	VCPUHours, MemoryGBHours float64
}

// ErrReservationDone means Confirm was called on a rolled-back reservation.
var ErrReservationDone = errors.New("quota: reservation already rolled back")

// The value of a running environment in q:{tag}:envs:running is
// "start_ms vcpu_milli mem_milli". usage returns its compute from `from` to
// `to` (ms), in milli-unit-seconds.
const luaUsage = `
local function usage(v, from, to)
  local start, c, m = string.match(v, '^(%-?%d+) (%d+) (%d+)$')
  if not start then return 0, 0 end
  local ms = to - math.max(tonumber(start), from)
  if ms <= 0 then return 0, 0 end
  return math.floor(ms * tonumber(c) / 1000), math.floor(ms * tonumber(m) / 1000)
end
local function running(key, from, to)
  local n, vcpu, mem = 0, 0, 0
  for _, v in ipairs(redis.call('HVALS', key)) do
    local c, m = usage(v, from, to)
    n, vcpu, mem = n + 1, vcpu + c, mem + m
  end
  return n, vcpu, mem
end
`

// reserveScript checks every quota and, if none is exhausted, records a
// pending reservation and counts it in the month. Concurrent environments
// are the running ones plus the pending reservations; compute is the
// month's closed usage plus the running environments' usage so far.
//
//	KEYS[1] q:{tag}:envs:running
//	KEYS[2] q:{tag}:envs:pending
//	KEYS[3] q:{tag}:envs:<month>
//	ARGV[1] now, ms (edge clock)
//	ARGV[2] first instant of the month, ms
//	ARGV[3] TTL of the month's key, ms
//	ARGV[4] reservation id
//	ARGV[5] reservation TTL, ms
//	ARGV[6] concurrent environments, ARGV[7] environments per month,
//	ARGV[8] vCPU and ARGV[9] memory quota in milli-unit-seconds; 0: unlimited
//	returns {'ok', 0, 0} or {quota kind, limit, used}
var reserveScript = redis.NewScript(luaUsage + `
local now, from, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5])
local maxActive, maxMonth = tonumber(ARGV[6]), tonumber(ARGV[7])
local maxVcpu, maxMem = tonumber(ARGV[8]), tonumber(ARGV[9])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local n, vcpu, mem = running(KEYS[1], from, now)
local active = n + redis.call('ZCARD', KEYS[2])
if maxActive > 0 and active >= maxActive then
  return {'concurrent_environments', maxActive, active}
end
local month = redis.call('HMGET', KEYS[3], 'created', 'vcpu', 'mem')
local created = tonumber(month[1]) or 0
if maxMonth > 0 and created >= maxMonth then
  return {'environments_per_month', maxMonth, created}
end
vcpu = vcpu + (tonumber(month[2]) or 0)
if maxVcpu > 0 and vcpu >= maxVcpu then
  return {'vcpu_hours_per_month', maxVcpu, vcpu}
end
mem = mem + (tonumber(month[3]) or 0)
if maxMem > 0 and mem >= maxMem then
  return {'memory_gb_hours_per_month', maxMem, mem}
end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
if redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('HINCRBY', KEYS[3], 'created', 1)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {'ok', 0, 0}
`)

// confirmScript turns a pending reservation into a running environment,
// also when the reservation expired meanwhile: the environment exists.
//
//	KEYS[1] q:{tag}:envs:pending
//	KEYS[2] q:{tag}:envs:running
//	ARGV[1] reservation id
//	ARGV[2] environment id
//	ARGV[3] start, ms; ARGV[4] vCPUs and ARGV[5] memory GB, in thousandths
//	ARGV[6] TTL of the running environments' key, ms
//	returns 1
var confirmScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[6]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
return 1
`)

// rollbackScript drops a pending reservation and gives back its count in
// the month it was made.
//
//	KEYS[1] q:{tag}:envs:pending
//	KEYS[2] q:{tag}:envs:<month of the reservation>
//	ARGV[1] reservation id
//	returns 1
var rollbackScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
if (tonumber(redis.call('HGET', KEYS[2], 'created')) or 0) > 0 then
  redis.call('HINCRBY', KEYS[2], 'created', -1)
end
return 1
`)

// releaseScript removes a running environment and adds its usage within the
// month to the month's closed usage.
//
//	KEYS[1] q:{tag}:envs:running
//	KEYS[2] q:{tag}:envs:<month>
//	ARGV[1] environment id
//	ARGV[2] first instant of the month, ms
//	ARGV[3] end of the environment, ms
//	ARGV[4] TTL of the month's key, ms
//	returns 1 if the environment was running, else 0
var releaseScript = redis.NewScript(luaUsage + `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local vcpu, mem = usage(v, tonumber(ARGV[2]), tonumber(ARGV[3]))
if vcpu > 0 or mem > 0 then
  redis.call('HINCRBY', KEYS[2], 'vcpu', vcpu)
  redis.call('HINCRBY', KEYS[2], 'mem', mem)
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return 1
`)

// usageScript reads a subject's month.
//
//	KEYS[1] q:{tag}:envs:running
//	KEYS[2] q:{tag}:envs:<month>
//	ARGV[1] now, ms; ARGV[2] first instant of the month, ms
//	returns {running, created, vcpu, mem}, compute in milli-unit-seconds
var usageScript = redis.NewScript(luaUsage + `
local n, vcpu, mem = running(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[1]))
local month = redis.call('HMGET', KEYS[2], 'created', 'vcpu', 'mem')
return {n, tonumber(month[1]) or 0, vcpu + (tonumber(month[2]) or 0), mem + (tonumber(month[3]) or 0)}
`)

// Environments keeps each subject's environment and compute quotas in
// Redis. Safe for concurrent use.
type Environments struct {
	rdb  redis.UniversalClient
	opts settings
}

// NewEnvironments returns Environments on rdb (a single Redis or a cluster).
// It uses o.KeyPrefix and o.Timeout.
func NewEnvironments(rdb redis.UniversalClient, o Options) *Environments {
	return &Environments{rdb: rdb, opts: newSettings(o)}
}

// month is the calendar month (UTC) of t: its key suffix and bounds.
type month struct {
	name        string
	first, next time.Time
}

func monthOf(t time.Time) month {
	t = t.UTC()
	first := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return month{name: first.Format("2006-01"), first: first, next: first.AddDate(0, 1, 0)}
}

// ttl is how long the month's key lives from now.
func (m month) ttl(now time.Time) int64 {
	return max(m.next.Add(monthRetention).Sub(now).Milliseconds(), 1)
}

// Reserve checks subject's quotas before an environment of the given size
// is created and, if none is exhausted, holds a concurrent slot and counts
// the environment in this month. Call Confirm when the backend created it,
// Rollback when it did not; a reservation left alone frees its slot (not its
// count) after the reservation TTL.
//
// Errors: *QuotaError when a quota is exhausted; ErrUnavailable (wrapped)
// when Redis cannot be reached.
func (e *Environments) Reserve(ctx context.Context, subject string, plan Quota, size Size) (*Reservation, error) {
	vcpu, mem, err := size.milli()
	if err != nil {
		return nil, err
	}
	now := e.opts.now()
	m := monthOf(now)
	tag := e.opts.tag(subject)
	r := &Reservation{e: e, subject: subject, tag: tagOf(tag), keys: tag + "envs:", month: m.name, id: rand.Text(), vcpu: vcpu, mem: mem}
	var res []any
	err = e.opts.call(ctx, func(ctx context.Context) (err error) {
		res, err = reserveScript.Run(ctx, e.rdb, []string{r.keys + "running", r.keys + "pending", r.keys + m.name},
			now.UnixMilli(), m.first.UnixMilli(), m.ttl(now), r.id, e.opts.reservationTTL.Milliseconds(),
			max(plan.ConcurrentEnvironments, 0), max(plan.EnvironmentsPerMonth, 0),
			computeUnits(plan.VCPUHoursPerMonth), computeUnits(plan.MemoryGBHoursPerMonth)).Slice()
		return err
	})
	if err != nil {
		return nil, redisError(ctx, "reserve environment", err)
	}
	kind, used, ok := decodeRefusal(res)
	if !ok {
		return nil, fmt.Errorf("quota: reserve environment: unexpected reply %v", res)
	}
	switch Kind(kind) {
	case "ok":
		return r, nil
	case ConcurrentEnvironments:
		return nil, quotaError(subject, ConcurrentEnvironments, float64(plan.ConcurrentEnvironments), float64(used), m.next)
	case EnvironmentsPerMonth:
		return nil, quotaError(subject, EnvironmentsPerMonth, float64(plan.EnvironmentsPerMonth), float64(used), m.next)
	case VCPUHoursPerMonth:
		return nil, quotaError(subject, VCPUHoursPerMonth, plan.VCPUHoursPerMonth, hours(used), m.next)
	case MemoryGBHoursPerMonth:
		return nil, quotaError(subject, MemoryGBHoursPerMonth, plan.MemoryGBHoursPerMonth, hours(used), m.next)
	}
	return nil, fmt.Errorf("quota: reserve environment: unexpected reply %v", res)
}

func decodeRefusal(res []any) (kind string, used int64, ok bool) {
	if len(res) != 3 {
		return "", 0, false
	}
	kind, ok1 := res[0].(string)
	used, ok2 := res[2].(int64)
	return kind, used, ok1 && ok2
}

// Release ends a running environment after DeleteEnvironment succeeded, by
// whichever subject: its owner's usage this month grows by its lifetime
// within the month (from its start, or the first of the month, to end). An
// environment that is not running (unknown, or released already) is left
// alone.
func (e *Environments) Release(ctx context.Context, environmentID string, end time.Time) error {
	_, err := e.release(ctx, environmentID, end)
	return err
}

// ReleaseAll is Release for every environment a forced DeleteProject or
// DeleteOrganization ended. It returns how many were running; on a Redis
// failure it goes on with the others and returns the first error.
func (e *Environments) ReleaseAll(ctx context.Context, environmentIDs []string, end time.Time) (int, error) {
	var (
		mu       sync.Mutex
		released int
		first    error
		wg       sync.WaitGroup
		work     = make(chan string)
	)
	for range min(len(environmentIDs), releaseWorkers) {
		wg.Go(func() {
			for id := range work {
				ok, err := e.release(ctx, id, end)
				mu.Lock()
				if ok {
					released++
				}
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range environmentIDs {
		work <- id
	}
	close(work)
	wg.Wait()
	return released, first
}

// releaseWorkers bounds the Redis calls one ReleaseAll has in flight.
const releaseWorkers = 8

func (e *Environments) release(ctx context.Context, environmentID string, end time.Time) (bool, error) {
	owner := e.opts.ownerKey(environmentID)
	var subject string
	err := e.opts.call(ctx, func(ctx context.Context) (err error) {
		subject, err = e.rdb.Get(ctx, owner).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, redisError(ctx, "release environment", err)
	}
	// The owner key lives on another slot than the subject's keys: a second
	// call. Until it runs, a retry of Release finds the owner again.
	ran, err := e.end(ctx, e.opts.tag(subject), environmentID, end)
	if err != nil {
		return false, err
	}
	err = e.opts.call(ctx, func(ctx context.Context) error { return e.rdb.Del(ctx, owner).Err() })
	if err != nil {
		return ran, redisError(ctx, "release environment", err)
	}
	return ran, nil
}

// end removes a running environment from the subject whose keys start with
// tag, adding its usage to the month; it reports whether it was running.
func (e *Environments) end(ctx context.Context, tag, environmentID string, end time.Time) (bool, error) {
	now := e.opts.now()
	m := monthOf(now)
	keys := tag + "envs:"
	var ran int64
	err := e.opts.call(ctx, func(ctx context.Context) (err error) {
		ran, err = releaseScript.Run(ctx, e.rdb, []string{keys + "running", keys + m.name},
			environmentID, m.first.UnixMilli(), end.UnixMilli(), m.ttl(now)).Int64()
		return err
	})
	if err != nil {
		return false, redisError(ctx, "release environment", err)
	}
	return ran == 1, nil
}

// Usage returns subject's consumption this month, for GetUsage.
func (e *Environments) Usage(ctx context.Context, subject string) (Usage, error) {
	now := e.opts.now()
	m := monthOf(now)
	keys := e.opts.tag(subject) + "envs:"
	var res []int64
	err := e.opts.call(ctx, func(ctx context.Context) (err error) {
		res, err = usageScript.Run(ctx, e.rdb, []string{keys + "running", keys + m.name}, now.UnixMilli(), m.first.UnixMilli()).Int64Slice()
		return err
	})
	if err != nil {
		return Usage{}, redisError(ctx, "read usage", err)
	}
	if len(res) != 4 {
		return Usage{}, fmt.Errorf("quota: read usage: unexpected reply %v", res)
	}
	return Usage{Month: m.first, Environments: int(res[0]), Created: int(res[1]), VCPUHours: hours(res[2]), MemoryGBHours: hours(res[3])}, nil
}

// Reservation is a held slot for one environment, until Confirm or
// Rollback. Its methods may be called from any goroutine.
type Reservation struct {
	e                     *Environments
	subject, keys, id     string
	tag                   string // the subject's hash tag, as the index holds it
	month                 string // where the reservation was counted
	vcpu, mem             int64
	mu                    sync.Mutex
	confirmCalled         bool
	confirmed, rolledBack bool
}

// Confirm records that the backend created the environment, running since
// start (zero: now): it counts as running for the concurrent quota and
// accrues compute until Release. Calling it again after it succeeded does
// nothing; after a failure it may be retried.
func (r *Reservation) Confirm(ctx context.Context, environmentID string, start time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.rolledBack:
		return ErrReservationDone
	case r.confirmed:
		return nil
	}
	r.confirmCalled = true
	if start.IsZero() {
		start = r.e.opts.now()
	}
	// The owner first: should the second call fail, an owner without a
	// running environment is harmless (Release finds nothing to end), while
	// a running environment without an owner could never be released.
	ttl := r.e.opts.recordTTL
	err := r.e.opts.call(ctx, func(ctx context.Context) error {
		return r.e.rdb.Set(ctx, r.e.opts.ownerKey(environmentID), r.subject, ttl).Err()
	})
	if err != nil {
		return redisError(ctx, "confirm environment", err)
	}
	err = r.e.opts.call(ctx, func(ctx context.Context) error {
		return confirmScript.Run(ctx, r.e.rdb, []string{r.keys + "pending", r.keys + "running"},
			r.id, environmentID, start.UnixMilli(), r.vcpu, r.mem, ttl.Milliseconds()).Err()
	})
	if err != nil {
		return redisError(ctx, "confirm environment", err)
	}
	r.confirmed = true
	// Last, so that reconciliation, which drops a subject from the index
	// only if its score did not move while it found no running environment,
	// never loses this one (see Reconcile).
	err = r.e.opts.call(ctx, func(ctx context.Context) error {
		_, err := r.e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZIncrBy(ctx, r.e.opts.indexKey(), 1, r.tag)
			p.PExpire(ctx, r.e.opts.indexKey(), ttl)
			return nil
		})
		return err
	})
	if err != nil {
		return redisError(ctx, "confirm environment", err)
	}
	return nil
}

// Unreadable records that the backend answered CreateEnvironment with
// success but the edge could not read the new environment's id (an unknown
// compression, an answer too large to read): the reservation is kept as a
// running environment under a placeholder id (PlaceholderPrefix and the
// reservation's id), so that it counts for the concurrent and compute
// quotas, until reconciliation settles it (see Reconcile).
func (r *Reservation) Unreadable(ctx context.Context) error {
	return r.Confirm(ctx, PlaceholderPrefix+r.id, time.Time{})
}

// PlaceholderPrefix starts the id under which an environment whose id the
// edge could not read is counted.
const PlaceholderPrefix = "unread:"

// Rollback gives the slot and the month's count back after the backend
// refused to create the environment. It does nothing once Confirm was
// called (the environment may exist) or after it succeeded, so it can be
// deferred right after Reserve.
func (r *Reservation) Rollback(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.confirmCalled || r.rolledBack {
		return nil
	}
	err := r.e.opts.call(ctx, func(ctx context.Context) error {
		return rollbackScript.Run(ctx, r.e.rdb, []string{r.keys + "pending", r.keys + r.month}, r.id).Err()
	})
	if err != nil {
		return redisError(ctx, "roll back reservation", err)
	}
	r.rolledBack = true
	return nil
}

func (o *settings) ownerKey(environmentID string) string {
	return o.keyPrefix + "q:owner:" + environmentID
}

// indexKey is the sorted set of the subjects (by hash tag) that have had a
// running environment: what reconciliation walks.
func (o *settings) indexKey() string { return o.keyPrefix + "q:envs:index" }

// tagOf is the hash tag inside a subject's key start ("…q:{tag}:").
func tagOf(keyStart string) string {
	i := strings.IndexByte(keyStart, '{')
	j := strings.IndexByte(keyStart, '}')
	if i < 0 || j < i {
		return ""
	}
	return keyStart[i+1 : j]
}

// keysOfTag is the start of the keys of the subject whose hash tag is tag.
func (o *settings) keysOfTag(tag string) string { return o.keyPrefix + "q:{" + tag + "}:" }

// milli returns the size in thousandths of a vCPU and of a GB.
func (s Size) milli() (vcpu, mem int64, err error) {
	if !(s.VCPUs >= 0 && s.MemoryGB >= 0) || math.IsInf(s.VCPUs, 0) || math.IsInf(s.MemoryGB, 0) {
		return 0, 0, fmt.Errorf("quota: invalid environment size %+v", s)
	}
	return int64(math.Round(s.VCPUs * 1000)), int64(math.Round(s.MemoryGB * 1000)), nil
}

const unitsPerHour = 1000 * 3600 // milli-unit-seconds

// computeUnits converts a quota in unit-hours; 0 (or less) is unlimited, so
// a positive quota is at least one unit.
func computeUnits(h float64) int64 {
	if !(h > 0) || math.IsInf(h, 1) {
		return 0
	}
	return max(int64(math.Round(h*unitsPerHour)), 1)
}

func hours(units int64) float64 { return float64(units) / unitsPerHour }
