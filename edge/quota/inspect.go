package quota

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// openScript counts a subject's unexpired leases without changing them.
//
//	KEYS[1] q:{tag}:streams
//	returns the number of leases whose expiry is after now (Redis clock)
var openScript = redis.NewScript(luaNow + `
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`)

// Open returns how many stream leases the subject holds now, across every
// edge replica: for an operator inspecting one subject.
func (s *Streams) Open(ctx context.Context, subject string) (int, error) {
	var n int64
	err := s.opts.call(ctx, func(ctx context.Context) (err error) {
		n, err = openScript.Run(ctx, s.rdb, []string{s.opts.tag(subject) + "streams"}).Int64()
		return err
	})
	if err != nil {
		return 0, redisError(ctx, "count streams", err)
	}
	return int(n), nil
}

// ReleaseAll drops every stream lease of the subject and returns how many
// were unexpired: slots held by streams that are gone (a crashed edge's,
// before they expire) are free at once. A stream still open takes its slot
// back at its next renewal (within a third of the lease period), since it
// still counts.
func (s *Streams) ReleaseAll(ctx context.Context, subject string) (int, error) {
	n, err := s.Open(ctx, subject)
	if err != nil {
		return 0, err
	}
	err = s.opts.call(ctx, func(ctx context.Context) error {
		return s.rdb.Del(ctx, s.opts.tag(subject)+"streams").Err()
	})
	if err != nil {
		return 0, redisError(ctx, "release streams", err)
	}
	return n, nil
}
