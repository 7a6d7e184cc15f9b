package conns_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/conns"
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
