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

// OverheadResult compares the same calls straight to the backend and
// through the edge.
type OverheadResult struct {
	Call    string        `json:"call"`
	Backend TargetLatency `json:"backend"`
	Edge    TargetLatency `json:"edge"`
	// Added is the edge's latency minus the backend's at each percentile,
	// in microseconds.
	Added Percentiles[int64] `json:"added_us"`
	// Ratio is the edge's latency over the backend's at each percentile.
	Ratio Percentiles[float64] `json:"ratio"`
}

// Percentiles holds one value per reported percentile.
type Percentiles[T int64 | float64] struct {
	P50  T `json:"p50"`
	P90  T `json:"p90"`
	P99  T `json:"p99"`
	P999 T `json:"p99_9"`
}

// TargetLatency is one target's side of an overhead run.
type TargetLatency struct {
	Target   string         `json:"target"`
	Calls    int            `json:"calls"`
	OK       int            `json:"ok"`
	Refused  int            `json:"refused"`
	Failed   int            `json:"errors"`
	OKPerSec float64        `json:"ok_per_s"`
	Latency  LatencySummary `json:"latency"`
}

// overheadSubjects picks enough subjects of the roomiest plan that the edge
// should refuse nothing: the edge's half of the offered calls within 80% of
// what their plan allows over the run (8 subjects for a closed model,
// whose rate is not known in advance).
func overheadSubjects(o *Options) []PlanCount {
	best := o.Plans[0]
	for _, p := range o.Plans {
		if p.RatePerMinute > best.RatePerMinute {
			best = p
		}
	}
	if o.Rate <= 0 {
		return []PlanCount{{Plan: best.Name, Count: 8}}
	}
	edgeCalls := o.Rate / 2 * o.Duration.Seconds()
	perSubject := float64(best.Burst) + float64(best.RatePerMinute)/60*o.Duration.Seconds()
	if best.Daily > 0 {
		perSubject = min(perSubject, float64(best.Daily))
	}
	n := int(math.Ceil(edgeCalls / (0.8 * perSubject)))
	return []PlanCount{{Plan: best.Name, Count: min(max(n, 1), 1000)}}
}

// side counts one target's calls.
type side struct {
	name                   string
	lat                    *Latency
	mu                     sync.Mutex
	calls, ok, ref, failed int
}

func runOverhead(ctx context.Context, r *runner, rep *Report) error {
	o := r.o
	backend := newTarget("backend", o.Backend, o.Protocol, r.tr)
	sides := [2]*side{{name: "backend", lat: newLatency()}, {name: "edge", lat: newLatency()}}
	targetOf := func(i int) *Target {
		if i == 0 {
			return backend
		}
		return r.edge()
	}
	call := func(ctx context.Context, tg *Target, s *Subject) Result {
		_, res := unary[svcv1.ListOrganizationsRequest, svcv1.ListOrganizationsResponse](ctx, tg, svcv1connect.OrganizationServiceListOrganizationsProcedure, s.Token(),
			&svcv1.ListOrganizationsRequest{}, nil)
		return res
	}

	// Warm up: one uncounted call per subject to each target, so that token
	// verification caches and connections do not weigh on the first calls.
	wctx, wcancel := context.WithTimeout(ctx, setupTimeout)
	for _, s := range r.subjects {
		for _, tg := range append([]*Target{backend}, r.edges...) {
			if res := call(wctx, tg, s); res.Err != nil && res.outcome() != Refused {
				wcancel()
				return fmt.Errorf("warm-up call to %s (%s) as %s: %w", tg.Name, tg.Base, s.Name, res.Err)
			}
		}
	}
	wcancel()

	start := time.Now().Add(20 * time.Millisecond)
	tl := newTimeline(start)
	tl.Declare("backend", "edge")
	loadCtx, stopLoad := context.WithDeadline(ctx, start.Add(o.Duration))
	defer stopLoad()
	callCtx, stopCalls := context.WithDeadline(ctx, start.Add(o.Duration+drain))
	defer stopCalls()
	interval := time.Duration(0)
	schedule := func(i int) (time.Duration, bool) {
		at := time.Duration(i) * interval
		return at, at < o.Duration
	}
	if o.Concurrency == 0 {
		interval = time.Duration(float64(time.Second) / o.Rate)
		rep.Planned = scheduled(schedule)
	}
	done, progressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(done, o.Progress, &r.meter, start, o.Duration, o.Rate)
	}()

	one := func(which int, s *Subject, from time.Time) {
		sentAt := time.Now()
		r.meter.sent.Add(1)
		res := call(callCtx, targetOf(which), s)
		out := res.outcome()
		r.meter.add(out)
		sd := sides[which]
		tl.Add(sd.name, sentAt, out, time.Since(from))
		if out == OK {
			sd.lat.Record(time.Since(from))
		}
		if out == Refused {
			r.refusal(s.Name, res, rateRefusal)
		}
		sd.mu.Lock()
		defer sd.mu.Unlock()
		sd.calls++
		switch out {
		case OK:
			sd.ok++
		case Refused:
			sd.ref++
		case Failed:
			sd.failed++
			if sd.failed <= 3 {
				r.note("%s: %v", sd.name, res.Err)
			}
		}
	}

	n := len(r.subjects)
	if o.Concurrency > 0 {
		rep.Model, rep.Concurrency = "closed", o.Concurrency
		var wg sync.WaitGroup
		for w := range o.Concurrency {
			wg.Go(func() {
				for k := 0; loadCtx.Err() == nil; k++ {
					one((w+k)%2, r.subjects[(w+k/2)%n], time.Now())
				}
			})
		}
		wg.Wait()
	} else {
		rep.Model, rep.Rate = "open", o.Rate
		calls := newPool(o.MaxInFlight)
		offer(loadCtx, start, schedule, func(i int, intended time.Time) bool {
			return calls.goCall(loadCtx, func() { one(i%2, r.subjects[(i/2)%n], intended) })
		})
		calls.wg.Wait()
	}
	close(done)
	<-progressDone
	rep.Elapsed = Seconds(time.Since(start))
	rep.Timeline = tl.Series(int(math.Ceil(o.Duration.Seconds())))

	res := &OverheadResult{Call: "OrganizationService/ListOrganizations"}
	for i, sd := range sides {
		tl := TargetLatency{Target: sd.name, Calls: sd.calls, OK: sd.ok, Refused: sd.ref, Failed: sd.failed,
			OKPerSec: float64(sd.ok) / o.Duration.Seconds(), Latency: sd.lat.Summary()}
		if i == 0 {
			tl.Target = "backend " + o.Backend
			res.Backend = tl
		} else {
			tl.Target = "edge"
			res.Edge = tl
		}
	}
	b, e := res.Backend.Latency, res.Edge.Latency
	res.Added = Percentiles[int64]{P50: e.P50 - b.P50, P90: e.P90 - b.P90, P99: e.P99 - b.P99, P999: e.P999 - b.P999}
	res.Ratio = Percentiles[float64]{P50: ratio(e.P50, b.P50), P90: ratio(e.P90, b.P90), P99: ratio(e.P99, b.P99), P999: ratio(e.P999, b.P999)}
	rep.Overhead = res

	if th := o.Thresholds; th.MaxOverheadP50 == 0 && th.MaxOverheadP99 == 0 && th.MaxP99 == 0 {
		r.note("no latency threshold was stated, so PASS says only that no call failed: state what the edge may add with -max-overhead-p99 (and -max-overhead-p50, -max-p99)")
	}
	if res.Edge.Refused > 0 {
		r.note("the edge refused %d calls: give more subjects (-subjects enterprise=N) or a lower -rate", res.Edge.Refused)
	}
	return nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
