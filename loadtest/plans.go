package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Plan is what the edge promises a subject: GCRA at RatePerMinute with
// Burst at once, and at most Daily requests per UTC day (0: no cap).
type Plan struct {
	Name          string `json:"name"`
	RatePerMinute int    `json:"rate_per_minute"`
	Burst         int    `json:"burst"`
	Daily         int    `json:"daily"`
}

// String is the -plans form: name=rate/burst/daily.
func (p Plan) String() string {
	return fmt.Sprintf("%s=%d/%d/%d", p.Name, p.RatePerMinute, p.Burst, p.Daily)
}

// Limit describes the plan for a table: 60/min b100 10000/d.
func (p Plan) Limit() string {
	day := "no daily cap"
	if p.Daily > 0 {
		day = fmt.Sprintf("%d/d", p.Daily)
	}
	return fmt.Sprintf("%d/min b%d %s", p.RatePerMinute, p.Burst, day)
}

// Interval is the GCRA emission interval: one more request becomes
// admissible every Interval once the burst is spent.
func (p Plan) Interval() time.Duration {
	return time.Minute / time.Duration(p.RatePerMinute)
}

// defaultPlans is the specification's table (docs/limits.md).
const defaultPlans = "free=60/100/10000,pro=300/500/100000,enterprise=1000/2000/0"

var planName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// parsePlans reads name=rate/burst/daily entries, comma-separated.
func parsePlans(s string) ([]Plan, error) {
	var plans []Plan
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, spec, ok := strings.Cut(item, "=")
		if !ok || !planName.MatchString(name) {
			return nil, fmt.Errorf("%q: want name=rate/burst/daily with a lower-case name, e.g. tiny=60/10/0", item)
		}
		parts := strings.Split(spec, "/")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q: want rate/burst/daily (requests per minute, burst, requests per day or 0), e.g. %s=60/10/0", item, name)
		}
		var n [3]int
		for i, part := range parts {
			v, err := strconv.Atoi(part)
			if err != nil || v < 0 || v > 100_000_000 {
				return nil, fmt.Errorf("%q: %q is not a whole number of requests", item, part)
			}
			n[i] = v
		}
		if n[0] < 1 || n[1] < 1 {
			return nil, fmt.Errorf("%q: the rate and the burst must be at least 1", item)
		}
		if seen[name] {
			return nil, fmt.Errorf("plan %s given twice", name)
		}
		seen[name] = true
		plans = append(plans, Plan{Name: name, RatePerMinute: n[0], Burst: n[1], Daily: n[2]})
	}
	if len(plans) == 0 {
		return nil, fmt.Errorf("no plan: want name=rate/burst/daily, comma-separated")
	}
	return plans, nil
}

// Allowance is what a plan admits to one subject over a run, and the
// tolerance the verdict gives it.
type Allowance struct {
	// Start is how many requests the subject could send at once when the run
	// began (the burst, less what it had used).
	Start int `json:"start"`
	// Span is the time from the subject's first counted request to its last.
	Span Seconds `json:"span_s"`
	// ByRate is Start plus one request per emission interval over Span.
	ByRate int `json:"by_rate"`
	// DailyLeft is what the daily cap still allowed (-1: no cap).
	DailyLeft int `json:"daily_left"`
	// Allowed is the smaller of ByRate and DailyLeft.
	Allowed int `json:"allowed"`
	// DailyReached is set when the daily cap, not the rate, is the bound.
	DailyReached bool `json:"daily_reached"`
	// Tolerance is the verdict's margin either side of Allowed.
	Tolerance int `json:"tolerance"`
}

// toleranceRule states the margin, for reports.
const toleranceRule = "per subject: max(1% of allowed, 1 request) + 1 request (one emission interval, for timing)"

// tolerance is max(1% of allowed, 1) plus one request for one emission
// interval of timing: the client's clock and the edge's see the span
// differently by a network delay, and the bucket's fraction of a request is
// invisible to both.
func tolerance(allowed int) int {
	return max(int(math.Ceil(0.01*float64(allowed))), 1) + 1
}

// allowance is what GCRA with plan p admits over span to a subject that can
// send start requests at once when the span begins and has dailyLeft
// requests left today (-1: no daily cap).
func allowance(p Plan, start int, span time.Duration, dailyLeft int) Allowance {
	if span < 0 {
		span = 0
	}
	a := Allowance{Start: start, Span: Seconds(span), DailyLeft: dailyLeft}
	a.ByRate = start + int(span/p.Interval())
	a.Allowed = a.ByRate
	if dailyLeft >= 0 && dailyLeft < a.Allowed {
		a.Allowed, a.DailyReached = dailyLeft, true
	}
	a.Tolerance = tolerance(a.Allowed)
	return a
}

// judge returns the verdict on admitted requests out of sent: no more
// than most's Allowed+Tolerance admitted (most runs to the latest moment
// the edge can have decided an admitted call), and no fewer than the
// smaller of least's Allowed (which runs to the last send) and sent, less
// its Tolerance (unfinished requests may have been admitted, so they count
// for the lower bound only). It returns the reasons for a FAIL.
func judge(most, least Allowance, sent, admitted, unfinished int) []string {
	var why []string
	if hi := most.Allowed + most.Tolerance; admitted > hi {
		why = append(why, fmt.Sprintf("admitted %d, more than allowed %d + %d", admitted, most.Allowed, most.Tolerance))
	}
	if lo := min(least.Allowed, sent) - least.Tolerance; admitted+unfinished < lo {
		why = append(why, fmt.Sprintf("admitted %d (+%d unfinished), fewer than allowed %d - %d", admitted, unfinished, min(least.Allowed, sent), least.Tolerance))
	}
	return why
}

// Seconds is a duration that reads as seconds in JSON.
type Seconds time.Duration

// MarshalJSON writes the duration in seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(s).Seconds(), 'f', 3, 64)), nil
}
