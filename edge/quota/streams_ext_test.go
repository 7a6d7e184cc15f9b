package quota_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

func acquire(t *testing.T, s *quota.Streams, subject string, max int) *quota.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), subject, max)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(l.Release)
	return l
}

func wantStreamLimit(t *testing.T, s *quota.Streams, subject string, max int) {
	t.Helper()
	l, err := s.Acquire(context.Background(), subject, max)
	if !errors.Is(err, quota.ErrStreamLimit) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("Acquire = %v, want ErrStreamLimit", err)
	}
}

func TestTwentyStreamsOpenThe21stIsRefusedUntilOneCloses(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		s := quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline})
		sub := testenv.Unique("sub")
		var leases []*quota.Lease
		for range quota.DefaultMaxStreams {
			leases = append(leases, acquire(t, s, sub, quota.DefaultMaxStreams))
		}
		wantStreamLimit(t, s, sub, quota.DefaultMaxStreams)
		acquire(t, s, testenv.Unique("other"), quota.DefaultMaxStreams) // another subject is not limited

		leases[7].Release()
		leases[7].Release() // idempotent: frees one slot, not two
		acquire(t, s, sub, quota.DefaultMaxStreams)
		wantStreamLimit(t, s, sub, quota.DefaultMaxStreams)
	})
}

func TestStreamsOfACrashedEdgeFreeThemselvesAfterOneLeasePeriod(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		crashed := neverRenew(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, LeasePeriod: tg.period}))
		healthy := quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline})
		sub := testenv.Unique("sub")
		for range quota.DefaultMaxStreams {
			acquire(t, crashed, sub, quota.DefaultMaxStreams) // released only when the test ends
		}
		acquired := tg.now(t)
		wantStreamLimit(t, healthy, sub, quota.DefaultMaxStreams)

		tg.passTime(t, acquired.Add(tg.period))
		for range quota.DefaultMaxStreams {
			acquire(t, healthy, sub, quota.DefaultMaxStreams)
		}
		wantStreamLimit(t, healthy, sub, quota.DefaultMaxStreams)
	})
}

func TestOpenStreamIsRenewedPastItsFirstLeasePeriod(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		tk := make(ticker)
		s := tk.drives(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, LeasePeriod: tg.period}))
		sub := testenv.Unique("sub")
		acquire(t, s, sub, 1)
		acquired := tg.now(t)

		tg.passTime(t, acquired.Add(tg.period/2))
		tk.renew(t)
		tg.passTime(t, acquired.Add(tg.period)) // the first lease period is over
		wantStreamLimit(t, s, sub, 1)
	})
}

func TestRedisBlipDuringRenewalKeepsTheStreamAndLogsOnce(t *testing.T) {
	tg := miniTarget(t) // fails on demand
	var out logs
	tk := make(ticker)
	s := tk.drives(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, Logger: slog.New(slog.NewTextHandler(&out, nil))}))
	sub := testenv.Unique("sub")
	l := acquire(t, s, sub, 1)

	tg.mini.SetError("LOADING Redis is loading the dataset in memory")
	tk.renew(t)
	tk.renew(t) // at least three failed renewals, two of them over
	if n := out.count("renewal failed"); n != 1 {
		t.Errorf("logged %d renewal failures, want 1:\n%s", n, out.String())
	}
	if _, err := s.Acquire(context.Background(), sub, 1); !errors.Is(err, quota.ErrUnavailable) {
		t.Errorf("Acquire while Redis fails = %v, want ErrUnavailable", err)
	}

	tg.mini.SetError("")
	tk.renew(t)
	if n := out.count("renewal works again"); n != 1 {
		t.Errorf("logged %d recoveries, want 1:\n%s", n, out.String())
	}
	wantStreamLimit(t, s, sub, 1) // the stream still holds its slot
	l.Release()
	acquire(t, s, sub, 1)
}

func TestUnlimitedStreamsAreCountedButNeverRefused(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		s := quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline})
		sub := testenv.Unique("sub")
		for range 30 {
			acquire(t, s, sub, 0)
		}
		wantStreamLimit(t, s, sub, 30) // the unlimited ones count for a limited call
	})
}

// unreachable returns a client of an address where nothing listens.
func unreachable(t *testing.T) redis.UniversalClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.DeadAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestRedisUnreachableAtAcquireIsUnavailableNotALimit(t *testing.T) {
	s := quota.NewStreams(unreachable(t), quota.Options{})
	_, err := s.Acquire(context.Background(), "sub", quota.DefaultMaxStreams)
	if !errors.Is(err, quota.ErrUnavailable) || errors.Is(err, quota.ErrStreamLimit) {
		t.Fatalf("Acquire = %v, want ErrUnavailable", err)
	}
}
