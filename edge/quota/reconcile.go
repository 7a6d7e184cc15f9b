package quota

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Existing reports which of ids the backend still has. It is how
// reconciliation asks the source of truth; the caller supplies it (an HTTP
// call to the backend's internal endpoint). ids holds at most
// ReconcileBatch ids.
type Existing func(ctx context.Context, ids []string) (map[string]bool, error)

// ReconcileBatch is the most ids one Existing call is asked about.
const ReconcileBatch = 500

// Held is a live environment as the backend holds it: its id, the subject
// that created it (the one its quota is counted for) and when it started.
type Held struct {
	ID, Subject string
	Start       time.Time
}

// Created returns one page of the live environments the backend holds, by
// the subject that created them: subject's alone, or, with subject empty,
// every subject's. after is the previous page's next, empty for the first;
// next is empty on the last page. The caller supplies it (an HTTP call to
// the backend's internal listing).
type Created func(ctx context.Context, subject, after string) (page []Held, next string, err error)

// Source is the backend, the source of truth, as reconciliation asks it,
// and how it counts what it learns.
type Source struct {
	Existing Existing
	// Created lists what the backend holds; nil: nothing is adopted.
	Created Created
	// Size is what an adopted environment counts for compute quotas (an
	// environment the edge confirmed keeps the size it was reserved at).
	Size Size
	// Grace is how long a placeholder for an unreadable answer counts
	// before it is ended (see Reconcile).
	Grace time.Duration
}

// Reconciled is what one reconciliation pass did.
type Reconciled struct {
	Subjects int // subjects whose running environments were checked
	Checked  int // running environments checked against the backend
	Ended    int // environments the backend no longer has: released
	Adopted  int // environments the backend has that Redis lacked: now counted
}

// inFlightSkew is how much earlier than a reservation in flight the
// backend's clock may have dated the environment that reservation is for:
// adoption leaves a subject's environments created from that moment on to
// their confirmation.
const inFlightSkew = 30 * time.Second

// adoptScript counts, as running, the environments of one subject that the
// backend holds and Redis lacks, each from its start, and returns their ids.
// Adoption goes by environment id (HSETNX), so it never counts one twice,
// whatever the order of a confirmation and a pass. A page whose
// environments Redis holds already (the usual case) costs one HEXISTS each.
// What it leaves alone:
//
//   - environments created at or after the start of the subject's oldest
//     reservation in flight (less inFlightSkew): one of them may be that
//     reservation's, counted by it until its confirmation replaces it with
//     the environment's id (a reservation that expired counts nothing, so
//     what it stood for may be adopted);
//
//   - every environment of a subject that holds a placeholder for an
//     unreadable answer (PlaceholderPrefix): the placeholder counts one of
//     them, the edge cannot tell which, until a pass ends it.
//
//     KEYS[1] q:{tag}:envs:running
//     KEYS[2] q:{tag}:envs:pending
//     ARGV[1] now, ms (edge clock); ARGV[2] reservation TTL, ms;
//     ARGV[3] inFlightSkew, ms; ARGV[4] vCPUs and ARGV[5] memory GB, in
//     thousandths; ARGV[6] TTL of the running environments' key, ms;
//     ARGV[7], ARGV[8], …: environment id, start (ms), …
//     returns the ids adopted
var adoptScript = redis.NewScript(`
local missing = {}
for i = 7, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then missing[#missing + 1] = i end
end
if #missing == 0 then return {} end
for _, id in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(id, 1, #'` + PlaceholderPrefix + `') == '` + PlaceholderPrefix + `' then return {} end
end
local from = nil
local oldest = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if oldest[2] then
  from = tonumber(oldest[2]) - tonumber(ARGV[2]) - tonumber(ARGV[3])
end
local adopted = {}
for _, i in ipairs(missing) do
  local start = tonumber(ARGV[i + 1])
  if (from == nil or start < from) and
     redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5]) == 1 then
    adopted[#adopted + 1] = ARGV[i]
  end
end
if #adopted > 0 and redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
return adopted
`)

// dropIndexScript removes a subject from the index only if its score is
// still the one seen before its running environments were read: a
// confirmation meanwhile moved it (Confirm bumps it after recording the
// environment), and the subject stays.
//
//	KEYS[1] the index; ARGV[1] tag; ARGV[2] score seen
var dropIndexScript = redis.NewScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
`)

// Reconcile makes the running environments Redis holds agree with the
// backend, the source of truth, both ways. First every environment Redis
// holds and the backend no longer has (deleted around the edge, by a forced
// delete the edge did not see, or whose DeleteEnvironment answer the edge
// could not read) is released, its compute counted up to now; the records
// of those still alive are renewed (their TTL). A placeholder for an answer
// the edge could not read (PlaceholderPrefix) is released once it is older
// than src.Grace: it stood in for the environment that long. Then every
// environment the backend holds and Redis lacks (created while Redis was
// down or full, whose confirmation was lost, created around the edge, or
// the one a placeholder just ended stood for) is adopted: counted as
// running for the subject that created it, from its start (see adoptScript
// for what waits). The backend's listing of every subject's environments
// is walked, so a subject Redis holds nothing of is visited too. A failed
// release walk does not stop the adoption: the pass goes on and returns
// both errors.
//
// Replicas share the work: with lease > 0, Reconcile first takes a lease in
// Redis for that long and returns ok false, doing nothing, when another
// replica holds one; the lease is not given back, so that replicas ticking
// at the same interval make about one pass per lease between them. With
// lease 0 it runs at once (a pass asked for by a forced delete). The work
// is idempotent, so overlapping passes are harmless.
//
// An environment is never released because of a race: Redis is read first,
// the backend asked after, and environment ids are never reused, so an
// environment the backend does not have when asked has ended.
func (e *Environments) Reconcile(ctx context.Context, src Source, lease time.Duration) (r Reconciled, ok bool, err error) {
	if lease > 0 {
		lock := e.opts.keyPrefix + "q:envs:reconciling"
		err = e.opts.call(ctx, func(ctx context.Context) (err error) {
			ok, err = e.rdb.SetNX(ctx, lock, rand.Text(), lease).Result()
			return err
		})
		if err != nil {
			return r, false, redisError(ctx, "reconcile", err)
		}
		if !ok {
			return r, false, nil
		}
	}

	err = e.releaseGone(ctx, src, &r)
	return r, true, errors.Join(err, e.adopt(ctx, src, "", &r))
}

// releaseGone is Reconcile's first half: it walks the index of subjects
// and releases what the backend no longer has.
func (e *Environments) releaseGone(ctx context.Context, src Source, r *Reconciled) error {
	var cursor uint64
	for {
		var page []string
		err := e.opts.call(ctx, func(ctx context.Context) (err error) {
			page, cursor, err = e.rdb.ZScan(ctx, e.opts.indexKey(), cursor, "", 200).Result()
			return err
		})
		if err != nil {
			return redisError(ctx, "reconcile", err)
		}
		subjects := make(map[string]float64, len(page)/2)
		for i := 0; i+1 < len(page); i += 2 {
			score, _ := strconv.ParseFloat(page[i+1], 64)
			subjects[page[i]] = score
		}
		if err := e.reconcileSubjects(ctx, subjects, src, r); err != nil {
			return err
		}
		if cursor == 0 {
			return nil
		}
	}
}

// adopt counts, as running, the environments the backend holds and Redis
// lacks: subject's, or every subject's (subject empty).
func (e *Environments) adopt(ctx context.Context, src Source, subject string, r *Reconciled) error {
	if src.Created == nil {
		return nil
	}
	vcpu, mem, err := src.Size.milli()
	if err != nil {
		return err
	}
	after := ""
	for {
		page, next, err := src.Created(ctx, subject, after)
		if err != nil {
			return fmt.Errorf("quota: reconcile: list the backend's environments: %w", err)
		}
		if err := e.adoptPage(ctx, page, vcpu, mem, r); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if next == after {
			return fmt.Errorf("quota: reconcile: the backend's listing does not move on from %q", after)
		}
		after = next
	}
}

// adoptPage adopts one page of the backend's listing: one script per
// subject, all in one round trip; then the owners of the adopted and their
// subjects' place in the index, in another.
func (e *Environments) adoptPage(ctx context.Context, page []Held, vcpu, mem int64, r *Reconciled) error {
	var subjects []string
	bySubject := map[string][]any{}
	for _, h := range page {
		if h.ID == "" || h.Subject == "" {
			continue
		}
		if _, ok := bySubject[h.Subject]; !ok {
			subjects = append(subjects, h.Subject)
		}
		bySubject[h.Subject] = append(bySubject[h.Subject], h.ID, h.Start.UnixMilli())
	}
	if len(subjects) == 0 {
		return nil
	}
	now := e.opts.now()
	ttl := e.opts.recordTTL
	results := make([]*redis.Cmd, len(subjects))
	err := e.opts.callBulk(ctx, func(ctx context.Context) error {
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, subject := range subjects {
				keys := e.opts.tag(subject) + "envs:"
				args := append([]any{now.UnixMilli(), e.opts.reservationTTL.Milliseconds(), inFlightSkew.Milliseconds(),
					vcpu, mem, ttl.Milliseconds()}, bySubject[subject]...)
				// EVAL, not EVALSHA: a pipeline cannot load a script
				// Redis lacks and retry.
				results[i] = adoptScript.Eval(ctx, p, []string{keys + "running", keys + "pending"}, args...)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return redisError(ctx, "reconcile: adopt", err)
	}
	adopted := map[string][]string{}
	for i, subject := range subjects {
		ids, err := results[i].StringSlice()
		if err != nil {
			return fmt.Errorf("quota: reconcile: adopt: unexpected reply: %w", err)
		}
		if len(ids) > 0 {
			adopted[subject] = ids
			r.Adopted += len(ids)
		}
	}
	if len(adopted) == 0 {
		return nil
	}
	// As Confirm: an owner, so that DeleteEnvironment releases it; the
	// index, so that the next pass's release walk visits it.
	err = e.opts.callBulk(ctx, func(ctx context.Context) error {
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for subject, ids := range adopted {
				for _, id := range ids {
					p.Set(ctx, e.opts.ownerKey(id), subject, ttl)
				}
				p.ZIncrBy(ctx, e.opts.indexKey(), 1, tagOf(e.opts.tag(subject)))
			}
			p.PExpire(ctx, e.opts.indexKey(), ttl)
			return nil
		})
		return err
	})
	if err != nil {
		return redisError(ctx, "reconcile: adopt", err)
	}
	return nil
}

// record is one running environment as Redis holds it.
type record struct {
	tag, id string
	start   time.Time
}

func (e *Environments) reconcileSubjects(ctx context.Context, subjects map[string]float64, src Source, r *Reconciled) error {
	tags := make([]string, 0, len(subjects))
	for tag := range subjects {
		tags = append(tags, tag)
	}
	running := make([]*redis.MapStringStringCmd, len(tags))
	err := e.opts.callBulk(ctx, func(ctx context.Context) error {
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, tag := range tags {
				running[i] = p.HGetAll(ctx, e.opts.keysOfTag(tag)+"envs:running")
			}
			return nil
		})
		return err
	})
	if err != nil {
		return redisError(ctx, "reconcile", err)
	}
	var records []record
	for i, tag := range tags {
		envs := running[i].Val()
		if len(envs) == 0 {
			// Nothing runs: drop the subject from the index, unless an
			// environment was confirmed meanwhile.
			err := e.opts.call(ctx, func(ctx context.Context) error {
				return dropIndexScript.Run(ctx, e.rdb, []string{e.opts.indexKey()}, tag, subjects[tag]).Err()
			})
			if err != nil {
				return redisError(ctx, "reconcile", err)
			}
			continue
		}
		r.Subjects++
		for id, v := range envs {
			start, _, _ := strings.Cut(v, " ")
			ms, _ := strconv.ParseInt(start, 10, 64)
			records = append(records, record{tag: tag, id: id, start: time.UnixMilli(ms)})
		}
	}

	now := e.opts.now()
	var alive, ended []record
	for len(records) > 0 {
		batch := records[:min(len(records), ReconcileBatch)]
		records = records[len(batch):]
		var ask []string
		for _, rec := range batch {
			if !strings.HasPrefix(rec.id, PlaceholderPrefix) {
				ask = append(ask, rec.id)
			}
		}
		have := map[string]bool{}
		if len(ask) > 0 {
			if have, err = src.Existing(ctx, ask); err != nil {
				return fmt.Errorf("quota: reconcile: ask the backend: %w", err)
			}
		}
		for _, rec := range batch {
			switch {
			case strings.HasPrefix(rec.id, PlaceholderPrefix):
				if now.Sub(rec.start) < src.Grace {
					alive = append(alive, rec)
					continue
				}
				ended = append(ended, rec)
			case have[rec.id]:
				alive = append(alive, rec)
			default:
				ended = append(ended, rec)
			}
		}
		r.Checked += len(ask)
	}
	for _, rec := range ended {
		ran, err := e.end(ctx, e.opts.keysOfTag(rec.tag), rec.id, now)
		if err != nil {
			return err
		}
		err = e.opts.call(ctx, func(ctx context.Context) error { return e.rdb.Del(ctx, e.opts.ownerKey(rec.id)).Err() })
		if err != nil {
			return redisError(ctx, "reconcile", err)
		}
		if ran {
			r.Ended++
		}
	}
	return e.renew(ctx, alive)
}

// renew extends the records of environments the backend still has.
func (e *Environments) renew(ctx context.Context, alive []record) error {
	if len(alive) == 0 {
		return nil
	}
	ttl := e.opts.recordTTL
	seen := map[string]bool{}
	err := e.opts.callBulk(ctx, func(ctx context.Context) error {
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, rec := range alive {
				if !seen[rec.tag] {
					seen[rec.tag] = true
					p.PExpire(ctx, e.opts.keysOfTag(rec.tag)+"envs:running", ttl)
				}
				p.PExpire(ctx, e.opts.ownerKey(rec.id), ttl)
			}
			p.PExpire(ctx, e.opts.indexKey(), ttl)
			return nil
		})
		return err
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return redisError(ctx, "reconcile", err)
	}
	return nil
}

// ReconcileSubject is Reconcile for one subject, at once and whatever the
// other replicas do: for an operator settling one customer's quota.
func (e *Environments) ReconcileSubject(ctx context.Context, subject string, src Source) (Reconciled, error) {
	var r Reconciled
	tag := tagOf(e.opts.tag(subject))
	score := -1.0 // not in the index: never dropped from it here
	err := e.opts.call(ctx, func(ctx context.Context) error {
		s, err := e.rdb.ZScore(ctx, e.opts.indexKey(), tag).Result()
		if err == nil {
			score = s
		}
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	})
	if err != nil {
		err = redisError(ctx, "reconcile", err)
	} else {
		err = e.reconcileSubjects(ctx, map[string]float64{tag: score}, src, &r)
	}
	return r, errors.Join(err, e.adopt(ctx, src, subject, &r))
}
