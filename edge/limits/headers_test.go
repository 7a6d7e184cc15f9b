package limits

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/ratelimit"
)

// TestRateLimitHeadersAreTheSameWhateverTheStepRemembers writes the headers
// of more sets of limits than the step keeps the values of, twice over, so
// that sets are remembered, found and forgotten: each time the five values
// are those of a step that remembers nothing.
func TestRateLimitHeadersAreTheSameWhateverTheStepRemembers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var sets [][]ratelimit.State
	for i := range 2 * len(policyValues{}.slots) {
		sets = append(sets, []ratelimit.State{
			{Name: "plan", Limit: 6000, Burst: 200 + i, Window: time.Minute, Remaining: 150 - i, ResetAfter: 1500 * time.Millisecond},
			{Name: "op:" + strconv.Itoa(i%3), Limit: 60, Burst: 60, Window: time.Minute, Remaining: -1, ResetAfter: time.Duration(i) * time.Second},
			{Name: ratelimit.DailyName, Limit: 1000, Burst: 1000, Window: 24 * time.Hour, Remaining: 990, ResetAfter: 5 * time.Hour},
		})
	}
	var remembering policyValues
	for round := range 2 {
		for i, states := range sets {
			got, want := http.Header{}, http.Header{}
			setRateLimitHeaders(got, &remembering, states, now)
			setRateLimitHeaders(want, new(policyValues), states, now)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, set %d: %v, want %v", round, i, got, want)
			}
		}
	}
	h := http.Header{}
	setRateLimitHeaders(h, &remembering, sets[0], now)
	for k, want := range map[string]string{
		"X-Ratelimit-Limit":     "60",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "1800000000",
		"Ratelimit-Policy":      `"plan";q=200;w=2, "op:0";q=60;w=60, "daily";q=1000;w=86400`,
		"Ratelimit":             `"plan";r=150;t=2, "op:0";r=0;t=0, "daily";r=990;t=18000`,
	} {
		if got := h[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}
