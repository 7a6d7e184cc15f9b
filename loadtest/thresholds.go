package main

import (
	"fmt"
	"strconv"
	"time"
)

// judgeThresholds checks the run against what the user stated (and the
// defaults: no error, 95% of the planned calls sent, none unfinished). A
// latency threshold stated for what the run did not measure is
// inconclusive, not passed.
func judgeThresholds(th Thresholds, rep *Report) []Check {
	t := rep.Totals
	var out []Check

	errRate := 0.0
	if t.Sent > 0 {
		errRate = float64(t.Failed) / float64(t.Sent)
	}
	c := Check{Name: "error rate", Expected: "≤ " + percent(th.MaxErrorRate) + " (-max-error-rate)",
		Observed: fmt.Sprintf("%s (%d errors of %d calls)", percent(errRate), t.Failed, t.Sent), Verdict: Pass}
	if errRate > th.MaxErrorRate {
		c.Verdict, c.FailedAt = Fail, firstSecond(rep.Timeline, func(i int, b Bucket) bool { return b.Failed > 0 })
		c.Problems = []string{fmt.Sprintf("%d of %d calls failed otherwise than refused (%s), above -max-error-rate %s", t.Failed, t.Sent, percent(errRate), percent(th.MaxErrorRate))}
	}
	out = append(out, c)

	if rep.Planned > 0 {
		sent := float64(t.Sent) / float64(rep.Planned)
		c := Check{Name: "achieved rate", Expected: fmt.Sprintf("≥ %s of %d planned calls (-min-achieved), none unfinished", percent(th.MinAchievedRate), rep.Planned),
			Observed: fmt.Sprintf("%d sent (%s, %.1f/s of %.1f/s), %d unfinished", t.Sent, percent(sent), rep.Achieved, rep.Rate, t.Unfinished), Verdict: Pass}
		if sent < th.MinAchievedRate {
			// Where the calls sent so far first fell behind the schedule.
			total := 0
			c.Verdict, c.FailedAt = Inconclusive, firstSecond(rep.Timeline, func(i int, b Bucket) bool {
				total += b.OK + b.Refused + b.Aborted + b.Failed
				return float64(total) < th.MinAchievedRate*rep.Rate*float64(i+1)
			})
			c.Problems = append(c.Problems, fmt.Sprintf("the tool sent %d of the %d calls it planned (%.1f/s of %.1f/s, %s): it could not keep up, so the edge was not offered the load the verdict needs (raise -max-inflight, give fewer subjects or a lower load, or run on a less loaded machine)",
				t.Sent, rep.Planned, rep.Achieved, rep.Rate, percent(sent)))
		}
		if t.Unfinished > 0 {
			c.Verdict = Inconclusive
			c.Problems = append(c.Problems, fmt.Sprintf("%d calls were unfinished when the run ended: what the edge did with them is unknown", t.Unfinished))
		}
		out = append(out, c)
	}

	if th.MaxP99 > 0 {
		var p99 int64
		measured := true
		switch {
		case rep.Overhead != nil:
			p99 = rep.Overhead.Edge.Latency.P99
		case rep.Latency != nil && rep.Latency.Count > 0:
			p99 = rep.Latency.P99
		default:
			measured = false
		}
		out = append(out, latencyThreshold("p99 latency", "-max-p99", th.MaxP99, p99, measured, micros))
	}
	if rep.Overhead != nil {
		if th.MaxOverheadP50 > 0 {
			out = append(out, latencyThreshold("edge adds at p50", "-max-overhead-p50", th.MaxOverheadP50, rep.Overhead.Added.P50, true, signedMicros))
		}
		if th.MaxOverheadP99 > 0 {
			out = append(out, latencyThreshold("edge adds at p99", "-max-overhead-p99", th.MaxOverheadP99, rep.Overhead.Added.P99, true, signedMicros))
		}
	}
	return out
}

// latencyThreshold judges a latency in microseconds, if measured, against
// limit; show formats it.
func latencyThreshold(name, flag string, limit time.Duration, us int64, measured bool, show func(int64) string) Check {
	c := Check{Name: name, Expected: "≤ " + micros(limit.Microseconds()) + " (" + flag + ")", Verdict: Pass}
	switch {
	case !measured:
		c.Observed, c.Verdict = "not measured", Inconclusive
		c.Problems = []string{"this run measured no latency to hold to " + flag}
	case us > limit.Microseconds():
		c.Observed, c.Verdict = show(us), Fail
		c.Problems = []string{fmt.Sprintf("%s, above %s %s", show(us), flag, micros(limit.Microseconds()))}
	default:
		c.Observed = show(us)
	}
	return c
}

// percent formats a fraction: 0.95 is 95%, 0.0123 is 1.23%.
func percent(f float64) string {
	return strconv.FormatFloat(100*f, 'g', 3, 64) + "%"
}

// firstSecond is the end of the first second, over every series in turn
// summed, for which at says true; nil when none does.
func firstSecond(series []Series, at func(i int, b Bucket) bool) *float64 {
	n := 0
	for _, s := range series {
		n = max(n, len(s.Buckets))
	}
	for i := range n {
		var sum Bucket
		for _, s := range series {
			if i < len(s.Buckets) {
				b := s.Buckets[i]
				sum.OK, sum.Refused, sum.Aborted, sum.Failed = sum.OK+b.OK, sum.Refused+b.Refused, sum.Aborted+b.Aborted, sum.Failed+b.Failed
			}
		}
		if at(i, sum) {
			return secondsAt(float64(i + 1))
		}
	}
	return nil
}
