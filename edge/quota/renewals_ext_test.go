package quota_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
)

func TestOneRoundTripRenewsEveryOpenLeaseOfEverySubject(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		var trips testenv.RoundTrips
		tg.rdb.AddHook(&trips)
		tk, obs := make(ticker), newRenewals()
		s := tk.drives(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, Renewals: obs}))
		const subjects, each, crowd = 40, 5, 600 // crowd: more leases than one script renews
		for range subjects {
			sub := testenv.Unique("sub")
			for range each {
				acquire(t, s, sub, each)
			}
		}
		crowded := testenv.Unique("crowded")
		for range crowd {
			acquire(t, s, crowded, 0)
		}
		const open = subjects*each + crowd

		// renewAll ticks until every lease was renewed once: one tick for a
		// renewer of all leases, a tick per lease for a renewer per lease.
		renewAll := func() (roundTrips, scripts int64) {
			t.Helper()
			trips0, scripts0 := trips.Count(), trips.Scripts()
			renewed := 0
			for renewed < open {
				rd := tk.round(t, obs)
				if rd.lost != 0 || rd.failed != 0 {
					t.Fatalf("renewal round %+v: a lease lost or failed", rd)
				}
				renewed += rd.renewed
			}
			if renewed != open {
				t.Errorf("renewed %d leases, want %d", renewed, open)
			}
			return trips.Count() - trips0, trips.Scripts() - scripts0
		}
		renewAll() // loads the script where a node does not have it yet
		roundTrips, scripts := renewAll()
		if roundTrips != 1 {
			t.Errorf("renewing %d leases of %d subjects took %d round trips, want 1", open, subjects+1, roundTrips)
		}
		if want := int64(subjects + 2); scripts != want { // the crowded subject's leases take two scripts
			t.Errorf("renewing %d leases of %d subjects ran %d scripts, want %d", open, subjects+1, scripts, want)
		}
	})
}

func TestOpenLeasesStayAliveAcrossSeveralLeasePeriodsAndNoRenewalIsMissed(t *testing.T) {
	for name, connect := range testenv.RedisTargets() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The real ticker and Redis's own clock: a renewal late by two
			// thirds of a period would lose a lease.
			const period = 2 * time.Second
			tg := target{rdb: connect(t), period: period}
			obs := newRenewals()
			s := quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, LeasePeriod: period, Renewals: obs})
			const subjects, each = 10, 5
			var subs []string
			for range subjects {
				sub := testenv.Unique("sub")
				subs = append(subs, sub)
				for range each {
					acquire(t, s, sub, each)
				}
			}
			acquired := tg.now(t)

			tg.passTime(t, acquired.Add(3*period))
			for _, sub := range subs {
				wantStreamLimit(t, s, sub, each)
			}
			rds := obs.unread(-1)
			for i, rd := range rds {
				if rd != (round{renewed: subjects * each}) {
					t.Errorf("renewal round %d: %+v, want every one of %d leases renewed", i+1, rd, subjects*each)
				}
			}
			rounds := len(rds)
			if rounds < 3 { // a lease lives one period: it took at least three rounds
				t.Errorf("%d renewal rounds in three lease periods", rounds)
			}
		})
	}
}

func TestReleasedLeaseIsNeverRenewedBack(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		tk, obs := make(ticker), newRenewals()
		s := tk.drives(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, Renewals: obs}))
		sub, other := testenv.Unique("sub"), testenv.Unique("other")
		acquire(t, s, other, 1) // keeps the renewer running

		// Released between rounds: not in the next one.
		acquire(t, s, sub, 1).Release()
		if rd := tk.round(t, obs); rd != (round{renewed: 1}) {
			t.Errorf("round after a release: %+v, want only the other lease renewed", rd)
		}
		acquire(t, s, sub, 1).Release() // its slot was free

		// Released while a round that holds it waits for Redis.
		l := acquire(t, s, sub, 1)
		hold := &holdPipeline{held: make(chan struct{}), unblock: make(chan struct{})}
		tg.rdb.AddHook(hold)
		tk <- time.Now()
		select {
		case <-hold.held:
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal round started")
		}
		released := make(chan struct{})
		go func() {
			l.Release()
			close(released)
		}()
		// Release must not return (nor remove the lease) before the round
		// lands; give a wrong one a moment to show it.
		select {
		case <-released:
			t.Error("Release returned while a renewal of its lease was in flight")
		case <-time.After(100 * time.Millisecond):
		}
		close(hold.unblock)
		obs.next(t)
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatal("Release does not return after the round landed")
		}
		if n, err := s.Open(context.Background(), sub); err != nil || n != 0 {
			t.Errorf("after Release: %d leases open (%v), want 0: a renewal put the lease back", n, err)
		}
		acquire(t, s, sub, 1)
	})
}

// holdPipeline holds the first pipeline sent through it until unblock is
// closed.
type holdPipeline struct {
	held, unblock chan struct{}
	once          bool
}

func (h *holdPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.once { // only the renewer pipelines in these tests, one round at a time
			h.once = true
			close(h.held)
			<-h.unblock
		}
		return next(ctx, cmds)
	}
}

func TestLeaseThatExpiredBeforeItsRenewalIsCountedAgain(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		var out logs
		tk, obs := make(ticker), newRenewals()
		s := tk.drives(quota.NewStreams(tg.rdb, quota.Options{Timeout: redisDeadline, LeasePeriod: tg.period, Renewals: obs,
			Logger: slog.New(slog.NewTextHandler(&out, nil))}))
		sub := testenv.Unique("sub")
		acquire(t, s, sub, 1)
		acquired := tg.now(t)

		tg.passTime(t, acquired.Add(tg.period)) // Redis was out of reach for a whole period
		if n, err := s.Open(context.Background(), sub); err != nil || n != 0 {
			t.Fatalf("after a lease period: %d open (%v), want the lease expired", n, err)
		}
		if rd := tk.round(t, obs); rd != (round{lost: 1}) {
			t.Errorf("renewal round: %+v, want the lease lost and put back", rd)
		}
		if n := out.count("counted again"); n != 1 {
			t.Errorf("logged %d lost leases, want 1:\n%s", n, out.String())
		}
		wantStreamLimit(t, s, sub, 1) // the open stream counts again
	})
}

func TestRedisOutageDuringRenewalsKeepsStreamsOpenAndCountsThemAgainAfter(t *testing.T) {
	p := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	var out logs
	tk, obs := make(ticker), newRenewals()
	s := tk.drives(quota.NewStreams(rdb, quota.Options{Timeout: redisDeadline, Renewals: obs,
		Logger: slog.New(slog.NewTextHandler(&out, nil))}))
	var subs []string
	for range 3 {
		sub := testenv.Unique("sub")
		subs = append(subs, sub)
		acquire(t, s, sub, 1)
	}

	p.Kill()
	for range 2 {
		if rd := tk.round(t, obs); rd != (round{failed: 3}) {
			t.Errorf("renewal round while Redis is down: %+v, want 3 failed", rd)
		}
	}
	if n := out.count("renewal failed"); n != 1 {
		t.Errorf("logged %d renewal failures, want 1:\n%s", n, out.String())
	}

	p.Restart() // empty: no leases, no scripts
	if rd := tk.round(t, obs); rd != (round{lost: 3}) {
		t.Errorf("renewal round after the outage: %+v, want the 3 leases put back", rd)
	}
	if n := out.count("renewal works again"); n != 1 {
		t.Errorf("logged %d recoveries, want 1:\n%s", n, out.String())
	}
	for _, sub := range subs {
		wantStreamLimit(t, s, sub, 1) // the streams stayed open and hold their slots
	}
}
