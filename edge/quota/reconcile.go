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

// Reconciled is what one reconciliation pass did.
type Reconciled struct {
	Subjects int // subjects whose running environments were checked
	Checked  int // running environments checked against the backend
	Ended    int // environments the backend no longer has: released
}

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
// backend, the source of truth: every environment the backend no longer has
// (deleted around the edge, by a forced delete the edge did not see, or
// whose DeleteEnvironment answer the edge could not read) is released, its
// compute counted up to now; the records of those still alive are renewed
// (their TTL). A placeholder for an answer the edge could not read
// (PlaceholderPrefix) is released once it is older than grace: it stood in
// for the environment that long.
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
func (e *Environments) Reconcile(ctx context.Context, exists Existing, lease, grace time.Duration) (r Reconciled, ok bool, err error) {
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

	var cursor uint64
	for {
		var page []string
		err = e.opts.call(ctx, func(ctx context.Context) (err error) {
			page, cursor, err = e.rdb.ZScan(ctx, e.opts.indexKey(), cursor, "", 200).Result()
			return err
		})
		if err != nil {
			return r, true, redisError(ctx, "reconcile", err)
		}
		subjects := make(map[string]float64, len(page)/2)
		for i := 0; i+1 < len(page); i += 2 {
			score, _ := strconv.ParseFloat(page[i+1], 64)
			subjects[page[i]] = score
		}
		if err := e.reconcileSubjects(ctx, subjects, exists, grace, &r); err != nil {
			return r, true, err
		}
		if cursor == 0 {
			return r, true, nil
		}
	}
}

// record is one running environment as Redis holds it.
type record struct {
	tag, id string
	start   time.Time
}

func (e *Environments) reconcileSubjects(ctx context.Context, subjects map[string]float64, exists Existing, grace time.Duration, r *Reconciled) error {
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
			if have, err = exists(ctx, ask); err != nil {
				return fmt.Errorf("quota: reconcile: ask the backend: %w", err)
			}
		}
		for _, rec := range batch {
			switch {
			case strings.HasPrefix(rec.id, PlaceholderPrefix):
				if now.Sub(rec.start) < grace {
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
func (e *Environments) ReconcileSubject(ctx context.Context, subject string, exists Existing, grace time.Duration) (Reconciled, error) {
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
	var r Reconciled
	if err != nil {
		return r, redisError(ctx, "reconcile", err)
	}
	err = e.reconcileSubjects(ctx, map[string]float64{tag: score}, exists, grace, &r)
	return r, err
}
