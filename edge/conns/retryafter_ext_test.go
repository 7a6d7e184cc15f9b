package conns_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/conns"
	"github.com/orgedge/edge/internal/testkit"
)

// refuseAll answers every call 429 with Retry-After: 1, as the edge
// answers a subject over its limit.
var refuseAll = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
})

func serveRetryAfter(t *testing.T, max int, held *atomic.Int64) *httptest.Server {
	t.Helper()
	b := conns.RetryAfter{Max: max, MaxHold: time.Minute, OnHold: func() { held.Add(1) }}
	srv := httptest.NewUnstartedServer(b.Wrap(refuseAll))
	srv.Config.ConnContext = conns.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, hc *http.Client, url, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("HTTP %d", res.StatusCode)
	}
}

func TestRefusedClientThatWaitsAsToldIsNeverHeld(t *testing.T) {
	t.Parallel()
	var held atomic.Int64
	srv := serveRetryAfter(t, 1, &held)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	// Refused four times in a row on one connection, each call a second
	// after the last refusal.
	for range 4 {
		call(t, hc, srv.URL, "a")
		time.Sleep(time.Second)
	}
	if held.Load() != 0 {
		t.Errorf("%d calls held", held.Load())
	}
}

func TestEarlyCallsOfOtherTokensOnTheConnectionAreNotCounted(t *testing.T) {
	t.Parallel()
	var held atomic.Int64
	srv := serveRetryAfter(t, 1, &held)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	// A proxy in front carries many clients: each token is refused once.
	for _, tok := range []string{"a", "b", "c", "d"} {
		call(t, hc, srv.URL, tok)
	}
	if held.Load() != 0 {
		t.Errorf("%d calls held", held.Load())
	}
	// The same token again at once: one early call is let through, the
	// next ones are held.
	for range 3 {
		call(t, hc, srv.URL, "d")
	}
	if held.Load() != 2 {
		t.Errorf("%d calls held, want 2", held.Load())
	}
}

// A reload replaces the policy whose refusal named the retry time (the
// limit may have been raised): the call held on it is served at once, and
// the client's next early calls start a new run rather than being held.
func TestAReloadServesHeldCallsAtOnceAndEndsTheRunOfEarlyCalls(t *testing.T) {
	t.Parallel()
	var held atomic.Int64
	var mu sync.Mutex
	policy := make(chan struct{})
	current := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return policy }
	reload := func() { mu.Lock(); defer mu.Unlock(); close(policy); policy = make(chan struct{}) }
	// A retry time far off: a held call that is not released by the
	// reload outlives the test's deadline.
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	b := conns.RetryAfter{Max: 1, MaxHold: time.Hour, OnHold: func() { held.Add(1) }, PolicyReplaced: current}
	srv := httptest.NewUnstartedServer(b.Wrap(refuse))
	srv.Config.ConnContext = conns.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: time.Minute}

	call(t, hc, srv.URL, "a") // refused: the run starts
	call(t, hc, srv.URL, "a") // one early call is let through
	done := make(chan struct{})
	go func() { defer close(done); call(t, hc, srv.URL, "a") }() // held
	testkit.WaitFor(t, "the third call held", func() bool { return held.Load() == 1 })
	reload()
	<-done // served once the policy is replaced, not after an hour
	// The refusal just answered was decided under the new policy: a new
	// run, one early call let through again, then held.
	call(t, hc, srv.URL, "a")
	if held.Load() != 1 {
		t.Fatalf("%d calls held after the reload, want the one before it", held.Load())
	}
}
