package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
)

// writeUsage writes GetUsage's answer for a person: each amount used beside
// the limit it counts against, in the units a person reads (0.012
// vCPU-hours, not 0.012203888888888889). A limit of 0 is none.
func writeUsage(w io.Writer, u *svcv1.GetUsageResponse) error {
	api, res := u.GetApiUsage(), u.GetResourceUsage()
	limits := api.GetLimits()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	today := fmt.Sprintf("%d (no daily cap)", api.GetRequestsToday())
	if c := limits.GetRequestsPerDay(); c > 0 {
		today = fmt.Sprintf("%d of %d, the daily cap (%s)", api.GetRequestsToday(), c, percent(float64(api.GetRequestsToday()), float64(c)))
	}
	fmt.Fprintf(tw, "Requests today (UTC)\t%s\n", today)
	fmt.Fprintf(tw, "Requests this month\t%d\n", api.GetRequestsThisMonth())
	fmt.Fprintf(tw, "Rate limit\t%d requests per minute\n", limits.GetRequestsPerMinute())
	q := res.GetQuotas()
	fmt.Fprintf(tw, "Environments running\t%s\n", ofQuota(strconv.Itoa(int(res.GetEnvironments())), float64(res.GetEnvironments()),
		float64(q.GetConcurrentEnvironments()), strconv.Itoa(int(q.GetConcurrentEnvironments())), ""))
	if n := q.GetEnvironmentsPerMonth(); n > 0 {
		fmt.Fprintf(tw, "Environments per month\t%d may be created\n", n)
	}
	fmt.Fprintf(tw, "Compute this month\t%s\n", ofQuota(amount(res.GetVcpuHours()), res.GetVcpuHours(),
		q.GetVcpuHoursPerMonth(), amount(q.GetVcpuHoursPerMonth()), " vCPU-hours"))
	fmt.Fprintf(tw, "Memory this month\t%s\n", ofQuota(amount(res.GetMemoryGbHours()), res.GetMemoryGbHours(),
		q.GetMemoryGbHoursPerMonth(), amount(q.GetMemoryGbHoursPerMonth()), " GB-hours"))
	return tw.Flush()
}

// ofQuota is "used of limit unit (p%)", or "used unit (no quota)" when
// limit is 0.
func ofQuota(used string, usedV, limitV float64, limit, unit string) string {
	if limitV <= 0 {
		return used + unit + " (no quota)"
	}
	return fmt.Sprintf("%s of %s%s, the quota (%s)", used, limit, unit, percent(usedV, limitV))
}

// amount is v with at most three decimals, and no trailing zeros: 0.012,
// 1.5, 12. A positive amount too small to show is "< 0.001", not 0.
func amount(v float64) string {
	if v > 0 && v < 0.0005 {
		return "< 0.001"
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// percent is used of limit as a whole percentage ("4%"); above 0 and below
// 1%, "< 1%".
func percent(used, limit float64) string {
	p := used / limit * 100
	if p > 0 && p < 1 {
		return "< 1%"
	}
	return strconv.FormatFloat(math.Floor(p), 'f', 0, 64) + "%"
}
