package quota_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
)

var (
	free      = quota.Quota{ConcurrentEnvironments: 2, EnvironmentsPerMonth: 10, VCPUHoursPerMonth: 100, MemoryGBHoursPerMonth: 200}
	unlimited = quota.Quota{}
	size      = quota.Size{VCPUs: 2, MemoryGB: 4}

	november = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	december = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

func newEnvironments(t *testing.T, tg target, start time.Time) (*quota.Environments, *clock) {
	t.Helper()
	c := newClock(start)
	e := quota.NewEnvironments(tg.rdb, quota.Options{Timeout: redisDeadline})
	e.SetClock(c.Now)
	return e, c
}

func reserve(t *testing.T, e *quota.Environments, subject string, plan quota.Quota, size quota.Size) *quota.Reservation {
	t.Helper()
	r, err := e.Reserve(context.Background(), subject, plan, size)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return r
}

// create reserves and confirms an environment, started at the clock's now.
func create(t *testing.T, e *quota.Environments, c *clock, subject string, plan quota.Quota, size quota.Size) string {
	t.Helper()
	id := testenv.Unique("env")
	if err := reserve(t, e, subject, plan, size).Confirm(context.Background(), id, c.Now()); err != nil {
		t.Fatalf("Confirm: %v", err)
	}
	return id
}

func release(t *testing.T, e *quota.Environments, c *clock, id string) {
	t.Helper()
	if err := e.Release(context.Background(), id, c.Now()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func wantRefused(t *testing.T, e *quota.Environments, subject string, plan quota.Quota, size quota.Size, want quota.QuotaError) {
	t.Helper()
	r, err := e.Reserve(context.Background(), subject, plan, size)
	var qe *quota.QuotaError
	if !errors.As(err, &qe) {
		if r != nil {
			_ = r.Rollback(context.Background())
		}
		t.Fatalf("Reserve = %v, want %s refused", err, want.Kind)
	}
	if qe.Kind != want.Kind || qe.Reason != want.Reason || qe.Limit != want.Limit || qe.Used != want.Used ||
		!qe.RetryAt.Equal(want.RetryAt) || qe.Subject != subject || qe.Description == "" {
		t.Fatalf("Reserve refused with %+v, want %+v", *qe, want)
	}
}

func usage(t *testing.T, e *quota.Environments, subject string) quota.Usage {
	t.Helper()
	u, err := e.Usage(context.Background(), subject)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	return u
}

func TestFreePlanThirdConcurrentEnvironmentIsRefusedUntilOneIsDeleted(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		first := create(t, e, c, sub, free, size)
		create(t, e, c, sub, free, size)
		wantRefused(t, e, sub, free, size, quota.QuotaError{
			Kind: quota.ConcurrentEnvironments, Reason: quota.ReasonEnvironmentQuota, Limit: 2, Used: 2})

		release(t, e, c, first)
		create(t, e, c, sub, free, size)
		if u := usage(t, e, sub); u.Environments != 2 || u.Created != 3 {
			t.Errorf("Usage = %+v, want 2 running, 3 created", u)
		}
	})
}

func TestRollbackGivesBackTheSlotAndTheMonthlyCount(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, _ := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		plan := quota.Quota{ConcurrentEnvironments: 1, EnvironmentsPerMonth: 1}
		r := reserve(t, e, sub, plan, size)
		wantRefused(t, e, sub, plan, size, quota.QuotaError{
			Kind: quota.ConcurrentEnvironments, Reason: quota.ReasonEnvironmentQuota, Limit: 1, Used: 1})

		for range 2 { // the second does nothing
			if err := r.Rollback(context.Background()); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
		}
		if err := r.Confirm(context.Background(), "env", november); !errors.Is(err, quota.ErrReservationDone) {
			t.Errorf("Confirm after Rollback = %v, want ErrReservationDone", err)
		}
		r = reserve(t, e, sub, plan, size)
		if u := usage(t, e, sub); u.Created != 1 {
			t.Errorf("Usage = %+v, want 1 created", u)
		}
		if err := r.Confirm(context.Background(), testenv.Unique("env"), november); err != nil {
			t.Fatalf("Confirm: %v", err)
		}
		if err := r.Rollback(context.Background()); err != nil { // deferred safety net: no-op once confirmed
			t.Fatalf("Rollback after Confirm: %v", err)
		}
		if u := usage(t, e, sub); u.Environments != 1 || u.Created != 1 {
			t.Errorf("Usage = %+v, want 1 running, 1 created", u)
		}
	})
}

func TestReservationOfACrashedEdgeFreesItsSlotButNotItsCount(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		reserve(t, e, sub, free, size) // neither confirmed nor rolled back
		reserve(t, e, sub, free, size)
		wantRefused(t, e, sub, free, size, quota.QuotaError{
			Kind: quota.ConcurrentEnvironments, Reason: quota.ReasonEnvironmentQuota, Limit: 2, Used: 2})

		c.Add(quota.DefaultReservationTTL)
		reserve(t, e, sub, free, size)
		if u := usage(t, e, sub); u.Environments != 0 || u.Created != 3 {
			t.Errorf("Usage = %+v, want 0 running, 3 created", u)
		}
	})
}

func TestEleventhEnvironmentOfTheMonthIsRefusedUntilTheFirstOfNextMonthUTC(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		for range 10 {
			release(t, e, c, create(t, e, c, sub, free, size))
		}
		for _, tc := range []struct {
			name    string
			now     time.Time
			refused bool
		}{
			{"last millisecond of November", december.Add(-time.Millisecond), true},
			{"midnight in Paris, still November in UTC", time.Date(2026, 12, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), true},
			{"first of December UTC", december, false},
		} {
			c.Set(tc.now)
			if tc.refused {
				wantRefused(t, e, sub, free, size, quota.QuotaError{
					Kind: quota.EnvironmentsPerMonth, Reason: quota.ReasonEnvironmentQuota, Limit: 10, Used: 10, RetryAt: december})
				continue
			}
			reserve(t, e, sub, free, size)
		}
	})
}

func TestLongRunningEnvironmentExhaustsTheComputeQuotaUntilNextMonth(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan quota.Quota
		size quota.Size
		full time.Duration // running time that uses the quota up
		kind quota.Kind
	}{
		{"vCPU-hours", quota.Quota{VCPUHoursPerMonth: 10}, quota.Size{VCPUs: 2, MemoryGB: 1}, 5 * time.Hour, quota.VCPUHoursPerMonth},
		{"memory GB-hours", quota.Quota{MemoryGBHoursPerMonth: 10}, quota.Size{VCPUs: 1, MemoryGB: 4}, 150 * time.Minute, quota.MemoryGBHoursPerMonth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachTarget(t, func(t *testing.T, tg target) {
				e, c := newEnvironments(t, tg, november)
				sub := testenv.Unique("sub")
				create(t, e, c, sub, tc.plan, tc.size)

				c.Add(tc.full - time.Second)
				if err := reserve(t, e, sub, tc.plan, tc.size).Rollback(context.Background()); err != nil {
					t.Fatal(err)
				}
				c.Add(time.Second)
				wantRefused(t, e, sub, tc.plan, tc.size, quota.QuotaError{
					Kind: tc.kind, Reason: quota.ReasonComputeQuota, Limit: 10, Used: 10, RetryAt: december})

				c.Set(december) // the environment still runs, but November's usage is behind
				reserve(t, e, sub, tc.plan, tc.size)
			})
		})
	}
}

func TestClosedEnvironmentsCountTowardsTheComputeQuota(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		plan := quota.Quota{VCPUHoursPerMonth: 4}
		for range 2 {
			id := create(t, e, c, sub, plan, size)
			c.Add(time.Hour)
			release(t, e, c, id)
			c.Add(time.Hour) // no environment runs
		}
		wantRefused(t, e, sub, plan, size, quota.QuotaError{
			Kind: quota.VCPUHoursPerMonth, Reason: quota.ReasonComputeQuota, Limit: 4, Used: 4, RetryAt: december})
	})
}

func TestUsageSplitsAnEnvironmentAtTheMonthBoundary(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, time.Date(2026, 10, 31, 22, 0, 0, 0, time.UTC))
		sub := testenv.Unique("sub")
		id := create(t, e, c, sub, unlimited, size) // 2 vCPUs, 4 GB
		october, november := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			name    string
			now     time.Time
			release bool
			want    quota.Usage
		}{
			{"an hour in October", time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC), false,
				quota.Usage{Month: october, Environments: 1, Created: 1, VCPUHours: 2, MemoryGBHours: 4}},
			{"two hours into November", time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC), false,
				quota.Usage{Month: november, Environments: 1, Created: 0, VCPUHours: 4, MemoryGBHours: 8}},
			{"deleted three hours into November", time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC), true,
				quota.Usage{Month: november, Environments: 0, Created: 0, VCPUHours: 6, MemoryGBHours: 12}},
			{"deleted usage no longer grows", time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), false,
				quota.Usage{Month: november, Environments: 0, Created: 0, VCPUHours: 6, MemoryGBHours: 12}},
		} {
			c.Set(tc.now)
			if tc.release {
				release(t, e, c, id)
			}
			if got := usage(t, e, sub); got != tc.want {
				t.Errorf("%s: Usage = %+v, want %+v", tc.name, got, tc.want)
			}
		}
	})
}

func TestUnlimitedPlanIsNeverRefused(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		for range 30 {
			create(t, e, c, sub, unlimited, quota.Size{VCPUs: 64, MemoryGB: 512})
		}
		c.Add(19 * 24 * time.Hour)
		create(t, e, c, sub, unlimited, size)
		if u := usage(t, e, sub); u.Environments != 31 || u.VCPUHours != 30*64*19*24 {
			t.Errorf("Usage = %+v, want 31 running, %d vCPU-hours", u, 30*64*19*24)
		}
	})
}

func TestConcurrentReservesAdmitExactlyTheConcurrentQuota(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, _ := newEnvironments(t, tg, november)
		sub := testenv.Unique("sub")
		var (
			wg               sync.WaitGroup
			mu               sync.Mutex
			admitted, others int
			refused          = map[quota.Kind]int{}
		)
		for range 10 {
			wg.Go(func() {
				_, err := e.Reserve(context.Background(), sub, free, size)
				var qe *quota.QuotaError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					admitted++
				case errors.As(err, &qe):
					refused[qe.Kind]++
				default:
					others++
					t.Errorf("Reserve: %v", err)
				}
			})
		}
		wg.Wait()
		if admitted != 2 || refused[quota.ConcurrentEnvironments] != 8 {
			t.Errorf("admitted %d, refused %v, want 2 admitted and 8 refused for concurrency", admitted, refused)
		}
	})
}

func TestDeletionByAnotherSubjectEndsTheOwnersEnvironmentOnce(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newEnvironments(t, tg, november)
		owner, other := testenv.Unique("owner"), testenv.Unique("other")
		id := create(t, e, c, owner, free, size)
		create(t, e, c, other, free, size)
		c.Add(time.Hour)
		release(t, e, c, id) // the caller need not be the owner: Release takes no subject
		c.Add(time.Hour)
		release(t, e, c, id)                    // again: no second count
		release(t, e, c, testenv.Unique("env")) // unknown: nothing to do

		if u := usage(t, e, owner); u.Environments != 0 || u.VCPUHours != 2 || u.MemoryGBHours != 4 {
			t.Errorf("owner's Usage = %+v, want 0 running, 2 vCPU-hours, 4 GB-hours", u)
		}
		if u := usage(t, e, other); u.Environments != 1 || u.VCPUHours != 4 {
			t.Errorf("other's Usage = %+v, want 1 running, 4 vCPU-hours", u)
		}
	})
}

func TestRedisUnreachableAtReserveIsUnavailableNotAQuota(t *testing.T) {
	e := quota.NewEnvironments(unreachable(t), quota.Options{})
	ctx := context.Background()
	_, err := e.Reserve(ctx, "sub", free, size)
	var qe *quota.QuotaError
	if !errors.Is(err, quota.ErrUnavailable) || errors.As(err, &qe) {
		t.Errorf("Reserve = %v, want ErrUnavailable", err)
	}
	if _, err := e.Usage(ctx, "sub"); !errors.Is(err, quota.ErrUnavailable) {
		t.Errorf("Usage = %v, want ErrUnavailable", err)
	}
	if err := e.Release(ctx, "env", time.Now()); !errors.Is(err, quota.ErrUnavailable) {
		t.Errorf("Release = %v, want ErrUnavailable", err)
	}
}

func TestInvalidSizeIsAnErrorNotAnOutage(t *testing.T) {
	e := quota.NewEnvironments(unreachable(t), quota.Options{})
	_, err := e.Reserve(context.Background(), "sub", free, quota.Size{VCPUs: -1})
	if err == nil || errors.Is(err, quota.ErrUnavailable) {
		t.Errorf("Reserve = %v, want an invalid-size error", err)
	}
}
