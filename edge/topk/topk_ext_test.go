package topk_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/topk"
)

func clockAt(r *topk.Refusals, t0 time.Time) *time.Time {
	now := t0
	topk.SetClock(r, func() time.Time { return now })
	return &now
}

func TestTheSubjectsRefusedMostComeFirstWithTheirLatestLimit(t *testing.T) {
	r := topk.New()
	clockAt(r, time.Unix(6000, 0))
	for range 3 {
		r.Refused("bob", "free", "plan")
	}
	r.Refused("alice", "pro", "plan")
	r.Refused("bob", "free", "daily")
	got := r.Top(10)
	want := []topk.Subject{{Subject: "bob", Refused: 4, Plan: "free", Limit: "daily"}, {Subject: "alice", Refused: 1, Plan: "pro", Limit: "plan"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Top = %v, want %v", got, want)
	}
	if got := r.Top(1); len(got) != 1 || got[0].Subject != "bob" {
		t.Fatalf("Top(1) = %v", got)
	}
}

// A flood of subjects refused once each, many more than the capacity,
// does not push out the one refused all along, and memory stays bounded.
func TestASubjectRefusedOftenStaysAmongTheTopThroughAFloodOfOthers(t *testing.T) {
	r := topk.New()
	clockAt(r, time.Unix(6000, 0))
	for i := range 100 * topk.Capacity {
		r.Refused(fmt.Sprintf("once-%d", i), "free", "plan")
		if i%20 == 0 {
			r.Refused("flooder", "free", "plan")
		}
	}
	top := r.Top(topk.Capacity * 10)
	if len(top) > topk.Capacity {
		t.Fatalf("%d subjects kept for one minute, more than the capacity %d", len(top), topk.Capacity)
	}
	if top[0].Subject != "flooder" {
		t.Fatalf("the top is %+v, want flooder", top[0])
	}
	if exact := uint64(5 * topk.Capacity); top[0].Refused < exact || top[0].Refused-top[0].Over > exact {
		t.Fatalf("flooder: refused %d (over %d), refused exactly %d", top[0].Refused, top[0].Over, exact)
	}
}

func TestRefusalsAreSummedOverTheLastMinutesAndThenForgotten(t *testing.T) {
	r := topk.New()
	now := clockAt(r, time.Unix(6000, 0))
	for m := range topk.Windows {
		*now = time.Unix(6000+int64(m)*60, 0)
		r.Refused("carol", "free", "plan")
	}
	if top := r.Top(1); len(top) != 1 || top[0].Refused != topk.Windows {
		t.Fatalf("after %d minutes: %v, want %d refusals", topk.Windows, top, topk.Windows)
	}
	*now = now.Add(time.Minute)
	if top := r.Top(1); top[0].Refused != topk.Windows-1 {
		t.Fatalf("a minute later: %v, want the oldest minute forgotten", top)
	}
	*now = now.Add(topk.Windows * time.Minute)
	if top := r.Top(1); len(top) != 0 {
		t.Fatalf("%d minutes later: %v, want none", topk.Windows, top)
	}
}

func TestCountingARefusalAllocatesNothing(t *testing.T) {
	r := topk.New()
	clockAt(r, time.Unix(6000, 0))
	subjects := make([]string, 3*topk.Capacity)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("s-%d", i)
	}
	for _, s := range subjects {
		r.Refused(s, "free", "plan") // the index grows to its size
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		r.Refused(subjects[i%len(subjects)], "free", "plan")
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per refusal, want 0", n)
	}
}
