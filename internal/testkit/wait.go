package testkit

import (
	"testing"
	"time"
)

// waitBound is how long WaitFor polls before it fails the test. It bounds
// a hang and is no timed assertion: a condition that holds returns at once,
// so the bound is generous for a loaded machine running tests side by side.
const waitBound = 30 * time.Second

// WaitFor polls cond every 20 ms until it holds, and fails the test naming
// what if it still does not after 30 s. It is the one way the stack tests
// wait for something the edge does after answering (a counter, a log line,
// a reload, a connection closed).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after %v: %s", waitBound, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ScrapeUntil scrapes the Prometheus text exposition at url (WaitFor's
// way) until ok accepts a scrape, and returns that scrape.
func ScrapeUntil(t testing.TB, url, what string, ok func(Samples) bool) Samples {
	t.Helper()
	var m Samples
	WaitFor(t, what, func() bool {
		m = Scrape(t, url)
		return ok(m)
	})
	return m
}
