package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// Time bounds outside the load itself.
const (
	setupTimeout   = 30 * time.Second // tokens, probes, objects a scenario needs
	cleanupTimeout = 30 * time.Second // deleting what a scenario created
	// drain is how long calls in flight when the duration ends may take to
	// finish: as long as any call may take, so that a call is unfinished
	// only when it ran out of its own time (a loaded machine's slow
	// answers are answers, and the verdict needs them).
	drain       = callTimeout
	maxExamples = 20 // malformed refusals kept in the report
)

// run runs the scenario o names and returns its report. Every goroutine it
// starts has ended when it returns. An error means the scenario could not
// be run at all (no token, no edge); a scenario that ran and failed returns
// a report whose Verdict is FAIL.
func run(ctx context.Context, o *Options) (*Report, error) {
	r := newRunner(o)
	defer r.close()
	rep := &Report{
		Scenario: o.Scenario, RunID: r.id, Started: r.started, Duration: Seconds(o.Duration),
		Protocol: o.Protocol, Edges: o.Edges, Backend: o.Backend,
	}
	if err := r.setup(ctx, rep); err != nil {
		return nil, err
	}
	if len(o.Admins) == 0 {
		r.note("the edges' metrics were not read: give -admin (each edge's admin listener) for the verdict to name what the edge did")
	}
	watched := r.watchEdges(ctx)
	var err error
	switch o.Scenario {
	case Conformance:
		err = runConformance(ctx, r, rep)
	case Operations:
		err = runOperations(ctx, r, rep)
	case Idempotency:
		err = runIdempotency(ctx, r, rep)
	case Overhead:
		err = runOverhead(ctx, r, rep)
	default:
		err = fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	if err != nil {
		return nil, err
	}
	rep.Edge = r.edgesAfter(ctx, watched)
	if ctx.Err() != nil {
		r.note("interrupted after %.1fs: the results cover that part of the run only", time.Since(r.started).Seconds())
	}
	r.mu.Lock()
	rep.Malformed = append(rep.Malformed, r.examples...)
	rep.Notes = append(r.notes, rep.Notes...)
	r.mu.Unlock()
	rep.Totals = Totals{
		Sent: int(r.meter.sent.Load()), OK: int(r.meter.ok.Load()), Refused: int(r.meter.refused.Load()), Aborted: int(r.meter.aborted.Load()),
		Failed: int(r.meter.failed.Load()), Unfinished: int(r.meter.unfinished.Load()), Malformed: int(r.malformed.Load()),
	}
	if rep.Planned > 0 {
		rep.Achieved = float64(rep.Totals.Sent) / o.Duration.Seconds()
	}
	rep.Thresholds = judgeThresholds(o.Thresholds, rep)
	rep.decide()
	return rep, nil
}

// runner holds what one run shares between its scenario's parts.
type runner struct {
	o       *Options
	id      string
	started time.Time
	tr      *transports
	iss     *issuer
	edges   []*Target
	next    atomic.Uint64

	subjects []*Subject
	probes   map[*Subject]probe

	meter     Meter
	malformed atomic.Int64

	mu       sync.Mutex
	examples []string
	notes    []string

	stopRenew context.CancelFunc
	renewDone chan struct{}
}

func newRunner(o *Options) *runner {
	now := time.Now()
	r := &runner{o: o, id: newRunID(now), started: now, tr: newTransports(o.MaxInFlight), iss: newIssuer(o.Issuer)}
	for i, e := range o.Edges {
		name := "edge"
		if len(o.Edges) > 1 {
			name = "edge#" + strconv.Itoa(i+1)
		}
		r.edges = append(r.edges, newTarget(name, e, o.Protocol, r.tr))
	}
	return r
}

// edge returns the next edge replica, round-robin.
func (r *runner) edge() *Target {
	return r.edges[int(r.next.Add(1)-1)%len(r.edges)]
}

func (r *runner) close() {
	if r.stopRenew != nil {
		r.stopRenew()
		<-r.renewDone
	}
	r.tr.close()
	r.iss.close()
}

// logf writes a setup or cleanup note to the log, if any.
func (r *runner) logf(format string, args ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "loadtest: "+format+"\n", args...)
	}
}

// note adds a line to the report's notes.
func (r *runner) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// refusal checks a refusal and keeps an example of a malformed one.
func (r *runner) refusal(who string, res Result, rule RefusalRule) bool {
	problems := checkRefusal(res.X, rule)
	if len(problems) == 0 {
		return true
	}
	r.malformed.Add(1)
	r.mu.Lock()
	if len(r.examples) < maxExamples {
		r.examples = append(r.examples, fmt.Sprintf("%s, %s, %s: %s", who, r.o.Protocol, res.Reason, strings.Join(problems, "; ")))
	}
	r.mu.Unlock()
	return false
}

// setup gets the subjects' tokens, asks the edge for each subject's usage
// and limits, and resolves plans not named on the command line.
func (r *runner) setup(ctx context.Context, rep *Report) error {
	if len(r.o.Users) == 0 && len(r.o.Clients) == 0 && !r.o.SubjectsSet {
		o := *r.o
		switch o.Scenario {
		case Operations:
			o.Subjects = operationsSubjects(o.Plans)
		case Overhead:
			o.Subjects = overheadSubjects(&o)
		}
		r.o = &o
	}
	r.subjects = buildSubjects(r.o, r.iss, r.id)
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	r.logf("run %s: getting tokens for %d subjects from %s", r.id, len(r.subjects), r.o.Issuer)
	if err := fetchTokens(sctx, r.subjects); err != nil {
		return err
	}
	renewCtx, stop := context.WithCancel(ctx)
	r.stopRenew, r.renewDone = stop, make(chan struct{})
	go func() {
		defer close(r.renewDone)
		renewTokens(renewCtx, r.subjects)
	}()

	r.probes = map[*Subject]probe{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(r.subjects))
	sem := make(chan struct{}, 16)
	for i, s := range r.subjects {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := r.probe(sctx, s)
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			r.probes[s] = p
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := firstOf(errs); err != nil {
		return err
	}
	for _, s := range r.subjects {
		p := r.probes[s]
		if s.Plan == "" {
			for _, plan := range r.o.Plans {
				if plan.RatePerMinute == p.rpm && plan.Daily == p.daily {
					s.Plan = plan.Name
					break
				}
			}
			if s.Plan == "" {
				return fmt.Errorf("subject %s: the edge applies %d/min and %d/day, which no plan of -plans (%s) has; name its plan (%s=plan) or give -plans",
					s.Name, p.rpm, p.daily, planNames(r.o.Plans), s.Name)
			}
		}
		rep.Subjects = append(rep.Subjects, SubjectInfo{Name: s.Name, Plan: s.Plan, EdgeLimits: p.limits()})
	}
	return nil
}

// probe is what the edge said of a subject before the load: its limits,
// today's requests (the probe included) and the plan's remaining burst.
type probe struct {
	at            time.Time
	rpm, daily    int
	today         int
	planRemaining int // -1 when the RateLimit header did not say
}

func (p probe) limits() string {
	if p.daily == 0 {
		return fmt.Sprintf("%d/min, no daily cap", p.rpm)
	}
	return fmt.Sprintf("%d/min, %d/day", p.rpm, p.daily)
}

// probe calls GetUsage as s, again after a moment while the edge answers
// unavailable (its Redis breaker half-open after an outage admits one call).
func (r *runner) probe(ctx context.Context, s *Subject) (probe, error) {
	var (
		at  time.Time
		tg  *Target
		out *svcv1.GetUsageResponse
		res Result
	)
	for attempt := 1; ; attempt++ {
		at, tg = time.Now(), r.edge()
		out, res = unary[svcv1.GetUsageRequest, svcv1.GetUsageResponse](ctx, tg, svcv1connect.UsageServiceGetUsageProcedure, s.Token(), &svcv1.GetUsageRequest{}, nil)
		if res.Err == nil || res.Code != connect.CodeUnavailable || res.X.Status == 0 || attempt == 5 { // retry only what the edge answered
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		}
	}
	if res.Err != nil {
		return probe{}, fmt.Errorf("GetUsage as %s at %s: %w", s.Name, tg.Base, res.Err)
	}
	u := out.GetApiUsage()
	return probe{
		at: at, rpm: int(u.GetLimits().GetRequestsPerMinute()), daily: int(u.GetLimits().GetRequestsPerDay()),
		today: int(u.GetRequestsToday()), planRemaining: rateLimitRemaining(res.X.Header.Get("RateLimit"), "plan"),
	}, nil
}

// rateLimitRemaining reads r= of the named limit in a RateLimit field
// ("plan";r=57;t=3, "daily";r=9990;t=42000); -1 when absent.
func rateLimitRemaining(field, name string) int {
	for _, item := range strings.Split(field, ",") {
		params := strings.Split(strings.TrimSpace(item), ";")
		if len(params) == 0 || strings.Trim(params[0], `"`) != name {
			continue
		}
		for _, kv := range params[1:] {
			if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "r="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// offer calls fire(i) at start+at(i) for i = 0, 1, … until at says stop or
// ctx ends (an open model: the schedule does not wait for answers). fire
// gets the intended time, from which latency is measured, so a late send
// (a full in-flight bound, a slow scheduler) shows as latency rather than
// vanishing (coordinated omission).
func offer(ctx context.Context, start time.Time, at func(i int) (time.Duration, bool), fire func(i int, intended time.Time) bool) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := 0; ; i++ {
		d, ok := at(i)
		if !ok {
			return
		}
		intended := start.Add(d)
		if wait := time.Until(intended); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				// Both may be ready when the scheduler was late: a call
				// whose time came before the end is still sent, or the
				// last call of a schedule would be lost half the time.
				if time.Now().Before(intended) {
					return
				}
			case <-timer.C:
			}
		}
		if !fire(i, intended) {
			return
		}
	}
}

// pool bounds calls in flight and waits for them.
type pool struct {
	sem chan struct{}
	wg  sync.WaitGroup
}

func newPool(n int) *pool { return &pool{sem: make(chan struct{}, n)} }

// goCall runs call in a goroutine once a slot is free; false when ctx
// ended first. A free slot wins over an ended ctx, so that a call whose
// time came is not lost to a coin toss between the two.
func (p *pool) goCall(ctx context.Context, call func()) bool {
	select {
	case p.sem <- struct{}{}:
	default:
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	p.wg.Go(func() {
		defer func() { <-p.sem }()
		call()
	})
	return true
}
