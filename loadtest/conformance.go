package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// conformanceSchedule returns when a subject of plan p sends its i-th call
// over a run of d: at an even pace, overload times what the plan allows
// over the run (burst + rate × d) in all. The burst drains before half the
// run has passed (at overload 2: after d·B/(2B+R·d)), so refusals start
// early and the plan's steady rate is measured over more than half the
// run; over long runs the pace tends to overload × the plan's rate.
func conformanceSchedule(p Plan, d time.Duration, overload float64) func(i int) (time.Duration, bool) {
	step := conformanceStep(p, d, overload)
	return func(i int) (time.Duration, bool) {
		at := time.Duration(i) * step
		return at, at < d
	}
}

// scheduled counts the calls of a schedule.
func scheduled(at func(i int) (time.Duration, bool)) int {
	n := 0
	for ; ; n++ {
		if _, ok := at(n); !ok {
			return n
		}
	}
}

// conformanceStep is the interval between a subject's calls.
func conformanceStep(p Plan, d time.Duration, overload float64) time.Duration {
	total := overload * (float64(p.Burst) + float64(p.RatePerMinute)*d.Minutes())
	return time.Duration(float64(d) / total)
}

// subjectRun counts one subject's calls.
type subjectRun struct {
	s     *Subject
	plan  Plan
	probe probe

	mu                                           sync.Mutex
	sent, ok, refused, failed, unfinished, wrong int
	secondHalfOK                                 int
	last                                         time.Time // the last send
	lastAdmitted                                 time.Time // the last admitted call's answer
}

func runConformance(ctx context.Context, r *runner, rep *Report) error {
	o := r.o
	rep.Tolerance = toleranceRule
	rep.Model = "open"
	runs := make([]*subjectRun, len(r.subjects))
	planned := 0
	for i, s := range r.subjects {
		plan, _ := o.plan(s.Plan)
		runs[i] = &subjectRun{s: s, plan: plan, probe: r.probes[s]}
		planned += scheduled(conformanceSchedule(plan, o.Duration, o.Overload))
	}
	rep.Planned, rep.Rate = planned, float64(planned)/o.Duration.Seconds()

	start := time.Now().Add(20 * time.Millisecond)
	tl := newTimeline(start)
	for _, p := range planOrder(runs) {
		tl.Declare(p.Name)
	}
	// Each replica's part, when there are several: proving a shared limit
	// is seeing each admit its share and no more in all.
	var replicas *Timeline
	if len(r.edges) > 1 {
		replicas = newTimeline(start)
		for _, e := range r.edges {
			replicas.Declare(e.Name)
		}
	}
	lat := newLatency()
	loadCtx, stopLoad := context.WithDeadline(ctx, start.Add(o.Duration))
	defer stopLoad()
	callCtx, stopCalls := context.WithDeadline(ctx, start.Add(o.Duration+drain))
	defer stopCalls()
	done := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(done, o.Progress, &r.meter, start, o.Duration, rep.Rate)
	}()

	calls := newPool(o.MaxInFlight)
	var schedulers sync.WaitGroup
	half := start.Add(o.Duration / 2)
	for _, sr := range runs {
		schedulers.Go(func() {
			offer(loadCtx, start, conformanceSchedule(sr.plan, o.Duration, o.Overload), func(_ int, intended time.Time) bool {
				return calls.goCall(loadCtx, func() {
					sentAt, tg := time.Now(), r.edge()
					r.meter.sent.Add(1)
					_, res := unary[svcv1.ListOrganizationsRequest, svcv1.ListOrganizationsResponse](callCtx, tg,
						svcv1connect.OrganizationServiceListOrganizationsProcedure, sr.s.Token(), &svcv1.ListOrganizationsRequest{}, nil)
					out := res.outcome()
					if out == Refused && !r.refusal(sr.s.Name, res, rateRefusal) {
						sr.mu.Lock()
						sr.wrong++
						sr.mu.Unlock()
					}
					took := time.Since(intended)
					if out == OK || out == Refused {
						lat.Record(took)
					}
					r.meter.add(out)
					tl.Add(sr.plan.Name, sentAt, out, took)
					if replicas != nil {
						replicas.Add(tg.Name, sentAt, out, took)
					}
					sr.mu.Lock()
					defer sr.mu.Unlock()
					sr.sent++
					if sentAt.After(sr.last) {
						sr.last = sentAt
					}
					switch out {
					case OK:
						sr.ok++
						if now := time.Now(); now.After(sr.lastAdmitted) {
							sr.lastAdmitted = now
						}
						if !sentAt.Before(half) {
							sr.secondHalfOK++
						}
					case Refused:
						sr.refused++
					case Unfinished:
						sr.unfinished++
					default:
						sr.failed++
						if sr.failed <= 3 {
							r.note("%s: call failed: %v", sr.s.Name, res.Err)
						}
					}
				})
			})
		})
	}
	schedulers.Wait()
	calls.wg.Wait()
	close(done)
	<-progressDone
	rep.Elapsed = Seconds(time.Since(start))

	s := lat.Summary()
	rep.Latency, rep.LatencyFrom = &s, "answered calls, from the intended send time"
	seconds := int(math.Ceil(o.Duration.Seconds()))
	rep.Timeline = tl.Series(seconds)
	if replicas != nil {
		rep.Replicas = replicas.Series(seconds)
	}
	for _, pc := range planOrder(runs) {
		pr := judgePlan(pc, runs, o.Duration)
		for i := range rep.Timeline {
			if s := &rep.Timeline[i]; s.Group == pr.Plan.Name {
				s.Limit, s.Allowed = limitLines(pr.Plan, pr.Subjects, seconds)
				if pr.Verdict == Fail {
					pr.FailedAt = overAdmittedAt(*s, pr.Tolerance)
				}
			}
		}
		rep.Plans = append(rep.Plans, pr)
	}
	return nil
}

// planOrder lists the plans of runs in the order of their first subject.
func planOrder(runs []*subjectRun) []Plan {
	var out []Plan
	seen := map[string]bool{}
	for _, sr := range runs {
		if !seen[sr.plan.Name] {
			seen[sr.plan.Name] = true
			out = append(out, sr.plan)
		}
	}
	return out
}

// judgePlan gives each subject of plan p its verdict, then the plan its
// own: PASS when every subject passed.
func judgePlan(p Plan, runs []*subjectRun, d time.Duration) PlanResult {
	pr := PlanResult{Plan: p, Verdict: Pass}
	secs := d.Seconds()
	for _, sr := range runs {
		if sr.plan.Name != p.Name {
			continue
		}
		sr.mu.Lock()
		res := SubjectResult{Name: sr.s.Name, Sent: sr.sent, Admitted: sr.ok, Refused: sr.refused, Failed: sr.failed,
			Unfinished: sr.unfinished, Malformed: sr.wrong, Verdict: Pass}
		last, lastAdmitted, secondHalf := sr.last, sr.lastAdmitted, sr.secondHalfOK
		sr.mu.Unlock()

		pb := sr.probe
		startLevel := p.Burst - 1 // the probe took one
		// The edge floors a fraction computed in floating point: burst-2 is
		// burst-1 less a rounding error.
		if pb.planRemaining >= 0 && (pb.planRemaining < startLevel-1 || pb.planRemaining > startLevel) {
			if sr.s.Fresh {
				res.Why = append(res.Why, fmt.Sprintf("after its first call the edge reports %d left of the plan's burst; a new subject of %s has burst-1 = %d", pb.planRemaining, p.Name, startLevel))
			} else {
				startLevel = min(pb.planRemaining+1, startLevel) // used before this run
			}
		}
		dailyLeft := -1
		if p.Daily > 0 {
			dailyLeft = max(p.Daily-pb.today, 0)
		}
		span := time.Duration(0)
		if !last.IsZero() {
			span = last.Sub(pb.at)
		}
		res.Allowance = allowance(p, startLevel, span, dailyLeft)
		// The edge decides a call when it serves it, which on a loaded
		// machine can be long after the send: what it may admit runs to
		// the last admitted call's answer, the latest it can have decided
		// one (as the operation limits are judged).
		most := res.Allowance
		if lastAdmitted.After(last) {
			most = allowance(p, startLevel, lastAdmitted.Sub(pb.at), dailyLeft)
		}
		why := judge(most, res.Allowance, res.Sent, res.Admitted, res.Unfinished)
		if len(why) > 0 && res.Admitted < res.Allowance.Allowed && res.Refused > 0 {
			why = append(why, "the edge refused what the plan allows; if its log says \"deciding without redis\", it was failing open (each replica admits limits.local_share of each limit)")
		}
		res.Why = append(res.Why, why...)
		if pb.rpm != p.RatePerMinute || pb.daily != p.Daily {
			res.Why = append(res.Why, fmt.Sprintf("the edge applies %s to it, the plan says %d/min, %d/day", pb.limits(), p.RatePerMinute, p.Daily))
		}
		if res.Malformed > 0 {
			res.Why = append(res.Why, fmt.Sprintf("%d malformed refusals", res.Malformed))
		}
		// Calls that failed otherwise are the error-rate threshold's.
		if len(res.Why) == 0 && (res.Sent <= res.Allowance.Allowed+res.Allowance.Tolerance || res.Refused == 0) {
			// A limit never pushed past proves nothing of the edge.
			res.Verdict = Inconclusive
			res.Why = append(res.Why, fmt.Sprintf("offered %d calls, allowed %d + %d, refused %d: never over its limit, so the limit was not tested", res.Sent, res.Allowance.Allowed, res.Allowance.Tolerance, res.Refused))
		} else if len(res.Why) > 0 {
			res.Verdict = Fail
		}
		if res.Verdict != Pass {
			if pr.Verdict != Fail {
				pr.Verdict = res.Verdict
			}
			for _, w := range res.Why {
				pr.Why = append(pr.Why, res.Name+": "+w)
			}
		}
		pr.Subjects++
		pr.Sent += res.Sent
		pr.Admitted += res.Admitted
		pr.Refused += res.Refused
		pr.Failed += res.Failed
		pr.Unfinished += res.Unfinished
		pr.Malformed += res.Malformed
		pr.Allowed += res.Allowance.Allowed
		pr.Tolerance += res.Allowance.Tolerance
		pr.DailyReached = pr.DailyReached || res.Allowance.DailyReached
		pr.SteadyPerMin += float64(secondHalf) / (secs / 2) * 60
		pr.PerSubject = append(pr.PerSubject, res)
	}
	pr.AdmittedPerSec = float64(pr.Admitted) / secs
	pr.AllowedPerSec = float64(pr.Allowed) / secs
	pr.RefusedPerSec = float64(pr.Refused) / secs
	pr.RatePerMin = p.RatePerMinute * pr.Subjects
	return pr
}

// limitLines are n subjects of plan p's steady rate per second, and what
// they may have been admitted in all by the end of each second.
func limitLines(p Plan, n, seconds int) (rate, cumulative []float64) {
	rate, cumulative = make([]float64, seconds), make([]float64, seconds)
	perSecond := float64(n*p.RatePerMinute) / 60
	for i := range rate {
		rate[i] = perSecond
		cumulative[i] = float64(n*p.Burst) + perSecond*float64(i+1)
	}
	return rate, cumulative
}

// overAdmittedAt is the end of the first second in which a plan's
// admitted calls in all rose above its allowance and tolerance, else the
// end of the run (the plan failed otherwise).
func overAdmittedAt(s Series, tolerance int) *float64 {
	admitted := 0
	for i, b := range s.Buckets {
		admitted += b.OK
		if i < len(s.Allowed) && float64(admitted) > s.Allowed[i]+float64(tolerance) {
			return secondsAt(float64(i + 1))
		}
	}
	return secondsAt(float64(len(s.Buckets)))
}
