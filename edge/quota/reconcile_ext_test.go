package quota_test

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
)

// backend is the source of truth as reconciliation asks it: the live
// environments, listed by creator two at a time.
type backend struct {
	mu   sync.Mutex
	envs map[string]quota.Held
}

func newBackend() *backend { return &backend{envs: map[string]quota.Held{}} }

func (b *backend) add(subject string, start time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := testenv.Unique("env")
	b.envs[id] = quota.Held{ID: id, Subject: subject, Start: start}
	return id
}

func (b *backend) remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.envs, id)
}

func (b *backend) source() quota.Source {
	return quota.Source{Existing: b.existing, Created: b.created, Size: size, Grace: time.Minute}
}

func (b *backend) existing(_ context.Context, ids []string) (map[string]bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	have := map[string]bool{}
	for _, id := range ids {
		if _, ok := b.envs[id]; ok {
			have[id] = true
		}
	}
	return have, nil
}

func (b *backend) created(_ context.Context, subject, after string) ([]quota.Held, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []quota.Held
	for _, h := range b.envs {
		if subject == "" || h.Subject == subject {
			all = append(all, h)
		}
	}
	key := func(h quota.Held) string { return h.Subject + " " + h.ID }
	slices.SortFunc(all, func(x, y quota.Held) int { return cmp.Compare(key(x), key(y)) })
	i, _ := slices.BinarySearchFunc(all, after, func(h quota.Held, k string) int { return cmp.Compare(key(h), k) })
	if after != "" && i < len(all) && key(all[i]) == after {
		i++
	}
	page := all[i:min(i+2, len(all))]
	if i+2 >= len(all) {
		return page, "", nil
	}
	return page, key(page[len(page)-1]), nil
}

// newReconciled is Environments under a key prefix of the test's own, so
// that a pass walks this test's subjects alone.
func newReconciled(t *testing.T, tg target, start time.Time) (*quota.Environments, *clock) {
	t.Helper()
	c := newClock(start)
	e := quota.NewEnvironments(tg.rdb, quota.Options{Timeout: redisDeadline, KeyPrefix: testenv.Unique("reconcile") + ":"})
	e.SetClock(c.Now)
	return e, c
}

func reconcile(t *testing.T, e *quota.Environments, b *backend) quota.Reconciled {
	t.Helper()
	r, ok, err := e.Reconcile(context.Background(), b.source(), 0)
	if err != nil || !ok {
		t.Fatalf("Reconcile = %+v, %v, %v", r, ok, err)
	}
	return r
}

func TestReconcileAdoptsWhatTheBackendHoldsFromItsStartOnce(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newReconciled(t, tg, november)
		b := newBackend()
		subs := []string{testenv.Unique("sub-a"), testenv.Unique("sub-b"), testenv.Unique("sub-c")}
		var first string
		for i, sub := range subs {
			for range i + 1 {
				id := b.add(sub, c.Now().Add(-2*time.Hour))
				if first == "" {
					first = id
				}
			}
		}
		if r := reconcile(t, e, b); r.Adopted != 6 || r.Ended != 0 {
			t.Fatalf("first pass: %+v, want 6 adopted", r)
		}
		for i, sub := range subs {
			u := usage(t, e, sub)
			// Two hours of 2 vCPUs and 4 GB each, from their start; not
			// counted in the month's creations (one that had a
			// reservation was counted by it).
			n := float64(i + 1)
			if u.Environments != i+1 || u.VCPUHours != n*4 || u.MemoryGBHours != n*8 || u.Created != 0 {
				t.Errorf("%s: %+v, want %d running, %v vCPU-hours, %v GB-hours, none created", sub, u, i+1, n*4, n*8)
			}
		}
		wantRefused(t, e, subs[1], free, size, quota.QuotaError{
			Kind: quota.ConcurrentEnvironments, Reason: quota.ReasonEnvironmentQuota, Limit: 2, Used: 2})
		if r := reconcile(t, e, b); r.Adopted != 0 || r.Ended != 0 || r.Checked != 6 {
			t.Fatalf("second pass: %+v, want 6 checked, nothing adopted or ended", r)
		}
		// An adopted environment has its owner: DeleteEnvironment ends it.
		b.remove(first)
		release(t, e, c, first)
		if u := usage(t, e, subs[0]); u.Environments != 0 {
			t.Fatalf("after the release: %+v, want none running", u)
		}
		if r := reconcile(t, e, b); r.Adopted != 0 || r.Ended != 0 {
			t.Fatalf("pass after the release: %+v, want nothing to do", r)
		}
	})
}

func TestAdoptionLeavesAReservationInFlightToItsConfirmation(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newReconciled(t, tg, november)
		b := newBackend()
		sub := testenv.Unique("sub")
		earlier := b.add(sub, c.Now().Add(-time.Hour)) // around the edge, an hour ago
		r := reserve(t, e, sub, unlimited, size)
		c.Add(time.Second)
		inFlight := b.add(sub, c.Now()) // the backend created it; the answer is on its way
		if got := reconcile(t, e, b); got.Adopted != 1 {
			t.Fatalf("pass during the confirmation adopted %d, want 1 (%s, not %s)", got.Adopted, earlier, inFlight)
		}
		if err := r.Confirm(context.Background(), inFlight, c.Now()); err != nil {
			t.Fatal(err)
		}
		if got := reconcile(t, e, b); got.Adopted != 0 {
			t.Fatalf("pass after the confirmation adopted %d, want 0", got.Adopted)
		}
		if u := usage(t, e, sub); u.Environments != 2 {
			t.Fatalf("%+v, want 2 running", u)
		}

		// A confirmation Redis lost: once the reservation has expired, a
		// pass adopts the environment; the confirmation, retried later, is
		// the same record.
		lost := reserve(t, e, sub, unlimited, size)
		id := b.add(sub, c.Now())
		c.Add(quota.DefaultReservationTTL)
		if got := reconcile(t, e, b); got.Adopted != 1 {
			t.Fatalf("pass after the reservation expired adopted %d, want 1", got.Adopted)
		}
		if err := lost.Confirm(context.Background(), id, c.Now().Add(-quota.DefaultReservationTTL)); err != nil {
			t.Fatal(err)
		}
		if u := usage(t, e, sub); u.Environments != 3 {
			t.Fatalf("%+v, want 3 running", u)
		}
	})
}

func TestAnUnreadableAnswersEnvironmentIsCountedByItsPlaceholderThenAdopted(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newReconciled(t, tg, november)
		b := newBackend()
		sub := testenv.Unique("sub")
		id := b.add(sub, c.Now())
		if err := reserve(t, e, sub, free, size).Unreadable(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)
		if r := reconcile(t, e, b); r.Adopted != 0 || r.Ended != 0 {
			t.Fatalf("pass within the grace: %+v, want the placeholder alone to count", r)
		}
		if u := usage(t, e, sub); u.Environments != 1 {
			t.Fatalf("%+v, want 1 running (the placeholder)", u)
		}
		// Past the grace the same pass ends the placeholder and adopts the
		// environment it stood for.
		c.Add(time.Minute)
		if r := reconcile(t, e, b); r.Adopted != 1 || r.Ended != 1 {
			t.Fatalf("pass past the grace: %+v, want the placeholder ended and %s adopted", r, id)
		}
		u := usage(t, e, sub)
		if u.Environments != 1 {
			t.Fatalf("%+v, want 1 running", u)
		}
		if _, err := e.ReconcileSubject(context.Background(), sub, b.source()); err != nil {
			t.Fatal(err)
		}
		if u := usage(t, e, sub); u.Environments != 1 {
			t.Fatalf("after settling: %+v, want 1 running", u)
		}
	})
}

func TestSettlingOneSubjectAdoptsItsEnvironmentsAlone(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		e, c := newReconciled(t, tg, november)
		b := newBackend()
		sub, other := testenv.Unique("sub"), testenv.Unique("other")
		for range 3 {
			b.add(sub, c.Now())
			b.add(other, c.Now())
		}
		r, err := e.ReconcileSubject(context.Background(), sub, b.source())
		if err != nil || r.Adopted != 3 {
			t.Fatalf("ReconcileSubject = %+v, %v; want 3 adopted", r, err)
		}
		if u := usage(t, e, other); u.Environments != 0 {
			t.Fatalf("the other subject: %+v, want nothing adopted", u)
		}
	})
}
