package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/testenv"
)

// BenchmarkReconcilePass is one reconciliation pass over 10,000 running
// environments of 1,000 subjects against a real Redis (the backend answers
// from memory, in pages of 1,000, so what is timed is the edge's side): the
// first pass adopts all of them ("adopt"), the next find Redis agreeing
// with the backend ("agree"); "agree-release-only" is such a pass without
// the adoption half, as passes were before it.
func BenchmarkReconcilePass(b *testing.B) {
	const subjects, each = 1000, 10
	rdb := testenv.Redis(b)
	var held []quota.Held
	for s := range subjects {
		for i := range each {
			held = append(held, quota.Held{ID: fmt.Sprintf("env_%04d_%02d", s, i), Subject: fmt.Sprintf("sub-%04d", s), Start: time.Now().Add(-time.Hour)})
		}
	}
	have := map[string]bool{}
	for _, h := range held {
		have[h.ID] = true
	}
	src := quota.Source{
		Existing: func(_ context.Context, ids []string) (map[string]bool, error) {
			out := make(map[string]bool, len(ids))
			for _, id := range ids {
				out[id] = have[id]
			}
			return out, nil
		},
		Created: func(_ context.Context, _, after string) ([]quota.Held, string, error) {
			i := 0
			if after != "" {
				fmt.Sscan(after, &i)
			}
			end := min(i+1000, len(held))
			if end == len(held) {
				return held[i:end], "", nil
			}
			return held[i:end], fmt.Sprint(end), nil
		},
		Size: size, Grace: time.Minute,
	}
	pass := func(b *testing.B, e *quota.Environments, want int) {
		b.Helper()
		r, _, err := e.Reconcile(context.Background(), src, 0)
		if err != nil || r.Adopted != want {
			b.Fatalf("pass: %+v, %v; want %d adopted", r, err, want)
		}
	}
	b.Run("adopt", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			e := quota.NewEnvironments(rdb, quota.Options{Timeout: time.Second, KeyPrefix: testenv.Unique("bench") + ":"})
			b.StartTimer()
			pass(b, e, len(held))
		}
	})
	b.Run("agree", func(b *testing.B) {
		e := quota.NewEnvironments(rdb, quota.Options{Timeout: time.Second, KeyPrefix: testenv.Unique("bench") + ":"})
		pass(b, e, len(held))
		for b.Loop() {
			pass(b, e, 0)
		}
	})
	b.Run("agree-release-only", func(b *testing.B) {
		e := quota.NewEnvironments(rdb, quota.Options{Timeout: time.Second, KeyPrefix: testenv.Unique("bench") + ":"})
		pass(b, e, len(held))
		created := src.Created
		src.Created = nil
		defer func() { src.Created = created }()
		for b.Loop() {
			pass(b, e, 0)
		}
	})
}
