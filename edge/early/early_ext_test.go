package early_test

import (
	"context"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/early"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

const plan = "plan"

// waited runs hd.Wait in the background and reports what it returned.
func waited(hd early.Hold, ctx context.Context) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- hd.Wait(ctx) }()
	return done
}

// within fails the test unless done reports by then (a bound far above
// any hold these tests expect to end at once).
func within(t *testing.T, done <-chan bool) bool {
	t.Helper()
	select {
	case ok := <-done:
		return ok
	case <-time.After(30 * time.Second):
		t.Fatal("the hold did not end")
		return false
	}
}

func TestAClientThatWaitsAsToldIsNeverHeld(t *testing.T) {
	h := early.New(early.Options{Max: 1})
	h.Told("alice", plan, t0, 10*time.Second, nil)
	if !h.Remembers() {
		t.Fatal("a refusal with a retry time is not remembered")
	}
	if hd := h.Arrive("alice", []string{plan}, t0.Add(10*time.Second)); hd.For != 0 {
		t.Fatalf("a call at the retry time is held for %v", hd.For)
	}
	if h.Remembers() {
		t.Fatal("the refusal is still remembered after its time came")
	}
}

func TestPastMaxEarlyCallsInARowTheNextIsHeldUntilTheRetryTime(t *testing.T) {
	holds := 0
	h := early.New(early.Options{Max: 2, OnHold: func() { holds++ }})
	h.Told("alice", plan, t0, 10*time.Second, nil)
	for i := range 2 {
		if hd := h.Arrive("alice", []string{plan}, t0.Add(time.Duration(i+1)*time.Second)); hd.For != 0 {
			t.Fatalf("early call %d of a Max of 2 held for %v", i+1, hd.For)
		}
	}
	now := t0.Add(3 * time.Second)
	hd := h.Arrive("alice", []string{plan}, now)
	// Until the retry time (7s away), plus a spread of up to half the time
	// told, at most a second.
	if hd.For < 7*time.Second || hd.For > 8*time.Second {
		t.Fatalf("the third early call is held %v, want 7s to 8s", hd.For)
	}
	if holds != 1 || h.Held() != 1 {
		t.Fatalf("OnHold called %d times, Held %d; want 1 and 1", holds, h.Held())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if within(t, waited(hd, ctx)) {
		t.Fatal("Wait returned true for a client that left")
	}
	if h.Held() != 0 {
		t.Fatalf("Held %d after the hold ended", h.Held())
	}
}

func TestOnlyTheRefusedSubjectAndLimitAreHeld(t *testing.T) {
	h := early.New(early.Options{Max: 1})
	h.Told("alice", "op:CreateEnvironment", t0, time.Minute, nil)
	h.Arrive("alice", []string{plan, "op:CreateEnvironment"}, t0.Add(time.Second))
	for _, tc := range []struct {
		subject string
		limits  []string
	}{
		{"bob", []string{plan, "op:CreateEnvironment"}},
		{"alice", []string{plan}},
		{"alice", []string{plan, "op:DeleteEnvironment"}},
	} {
		if hd := h.Arrive(tc.subject, tc.limits, t0.Add(2*time.Second)); hd.For != 0 {
			t.Errorf("%s calling %v held %v: that limit refused no one else", tc.subject, tc.limits, hd.For)
		}
	}
	if hd := h.Arrive("alice", []string{plan, "op:CreateEnvironment"}, t0.Add(2*time.Second)); hd.For == 0 {
		t.Fatal("alice's second early CreateEnvironment was not held")
	}
}

func TestACallSentBeforeTheRefusalWasAnsweredIsNotEarly(t *testing.T) {
	h := early.New(early.Options{Max: 1})
	h.Told("alice", plan, t0, time.Minute, nil)
	for range 3 {
		if hd := h.Arrive("alice", []string{plan}, t0); hd.For != 0 {
			t.Fatalf("a call arriving with the refusal held %v", hd.For)
		}
	}
}

func TestAHoldIsBoundedByMaxHold(t *testing.T) {
	h := early.New(early.Options{Max: 1, MaxHold: 5 * time.Second})
	h.Told("alice", "daily", t0, 6*time.Hour, nil)
	h.Arrive("alice", []string{"daily"}, t0.Add(time.Second))
	if hd := h.Arrive("alice", []string{"daily"}, t0.Add(2*time.Second)); hd.For != 5*time.Second {
		t.Fatalf("a daily limit's early call held %v, want MaxHold's 5s", hd.For)
	}
}

func TestPastMaxHeldASubjectsEarlyCallsAreNotHeld(t *testing.T) {
	h := early.New(early.Options{Max: 1, MaxHeld: 2})
	h.Told("alice", plan, t0, time.Minute, nil)
	h.Arrive("alice", []string{plan}, t0.Add(time.Second))
	var held []early.Hold
	for range 3 {
		held = append(held, h.Arrive("alice", []string{plan}, t0.Add(2*time.Second)))
	}
	if held[0].For == 0 || held[1].For == 0 || held[2].For != 0 {
		t.Fatalf("holds %v, %v, %v; want two held, the third not (MaxHeld 2)", held[0].For, held[1].For, held[2].For)
	}
	if h.Held() != 2 {
		t.Fatalf("Held %d, want 2", h.Held())
	}
}

func TestAReplacedPolicyEndsTheHoldAndForgetsTheRefusal(t *testing.T) {
	h := early.New(early.Options{Max: 1, MaxHold: time.Hour})
	policy := make(chan struct{})
	h.Told("alice", plan, t0, time.Hour, policy)
	h.Arrive("alice", []string{plan}, t0.Add(time.Second))
	hd := h.Arrive("alice", []string{plan}, t0.Add(2*time.Second))
	if hd.For == 0 {
		t.Fatal("not held")
	}
	done := waited(hd, context.Background())
	close(policy) // a reload: the retry time no longer says anything
	if !within(t, done) {
		t.Fatal("Wait returned false when the policy was replaced")
	}
	if next := h.Arrive("alice", []string{plan}, t0.Add(3*time.Second)); next.For != 0 {
		t.Fatalf("after the policy was replaced a call is held %v", next.For)
	}
}

func TestARefusalUnderANewPolicyStartsTheCountAfresh(t *testing.T) {
	h := early.New(early.Options{Max: 1})
	old := make(chan struct{})
	h.Told("alice", plan, t0, time.Minute, old)
	h.Arrive("alice", []string{plan}, t0.Add(time.Second))
	h.Told("alice", plan, t0.Add(2*time.Second), time.Minute, make(chan struct{}))
	if hd := h.Arrive("alice", []string{plan}, t0.Add(3*time.Second)); hd.For != 0 {
		t.Fatalf("the first early call under a new policy held %v", hd.For)
	}
}

func TestStopEndsEveryHoldNowAndFromNowOn(t *testing.T) {
	h := early.New(early.Options{Max: 1, MaxHold: time.Hour})
	h.Told("alice", plan, t0, time.Hour, nil)
	h.Arrive("alice", []string{plan}, t0.Add(time.Second))
	done := waited(h.Arrive("alice", []string{plan}, t0.Add(2*time.Second)), context.Background())
	h.Stop()
	if !within(t, done) {
		t.Fatal("Wait returned false on Stop: the call is decided, not dropped")
	}
	h.Stop() // more than once
	if !within(t, waited(h.Arrive("alice", []string{plan}, t0.Add(3*time.Second)), context.Background())) {
		t.Fatal("a hold after Stop did not end at once")
	}
}

func TestWithoutMaxNothingIsEverHeld(t *testing.T) {
	h := early.New(early.Options{})
	if h != nil {
		t.Fatal("New with Max 0 returned holds")
	}
	h.Told("alice", plan, t0, time.Minute, nil)
	if h.Remembers() || h.Held() != 0 {
		t.Fatal("a nil Holds remembers or holds")
	}
	if hd := h.Arrive("alice", []string{plan}, t0.Add(time.Second)); hd.For != 0 {
		t.Fatalf("a nil Holds held %v", hd.For)
	}
	h.Stop()
}
