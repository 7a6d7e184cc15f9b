package limits

import (
	"net/http"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/ratelimit"
)

// BenchmarkRateLimitHeaders formats the rate limit headers of an admitted
// call with a plan limit and a daily cap.
func BenchmarkRateLimitHeaders(b *testing.B) {
	states := []ratelimit.State{
		{Name: "plan", Limit: 6000, Burst: 200, Window: time.Minute, Remaining: 199, ResetAfter: 10 * time.Millisecond},
		{Name: ratelimit.DailyName, Limit: 1_000_000, Burst: 1_000_000, Window: 24 * time.Hour, Remaining: 999_000, ResetAfter: 5 * time.Hour},
	}
	h := http.Header{}
	now := time.Now()
	var c policyValues
	b.ReportAllocs()
	for b.Loop() {
		setRateLimitHeaders(h, &c, states, now)
	}
}
