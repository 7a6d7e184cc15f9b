package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// The operation table's limits the operations scenario checks
// (docs/limits.md): per subject, burst equal to the rate.
const (
	createEnvironmentPerMin = 10
	searchCatalogPerMin     = 30
	validateBlueprintPerMin = 30
	streamsPerSubject       = 20
	freeConcurrentEnvs      = 2
	blueprintID             = "redis-7"
)

// operationsSubjects is one subject for the operation rates and the
// streams (pro, else enterprise, else the first plan other than free) and
// one free subject for the environment quota.
func operationsSubjects(plans []Plan) []PlanCount {
	var out []PlanCount
	for _, want := range []string{"pro", "enterprise"} {
		if slices.ContainsFunc(plans, func(p Plan) bool { return p.Name == want }) {
			out = append(out, PlanCount{Plan: want, Count: 1})
			break
		}
	}
	if len(out) == 0 {
		for _, p := range plans {
			if p.Name != "free" {
				out = append(out, PlanCount{Plan: p.Name, Count: 1})
				break
			}
		}
	}
	if slices.ContainsFunc(plans, func(p Plan) bool { return p.Name == "free" }) {
		out = append(out, PlanCount{Plan: "free", Count: 1})
	}
	return out
}

// ops is the state of one operations run.
type ops struct {
	r     *runner
	tl    *Timeline
	clean []func(context.Context) error // in reverse order of creation
}

// count records a call for the progress line and the chart.
func (o *ops) count(sentAt time.Time, res Result) Outcome {
	out := res.outcome()
	o.r.meter.sent.Add(1)
	o.r.meter.add(out)
	o.tl.Add("calls", sentAt, out, time.Since(sentAt))
	return out
}

func runOperations(ctx context.Context, r *runner, rep *Report) error {
	start := time.Now()
	op := &ops{r: r, tl: newTimeline(start)}
	ctx, cancel := context.WithTimeout(ctx, r.o.Duration)
	defer cancel()
	done, progressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(done, r.o.Progress, &r.meter, start, r.o.Duration, 0)
	}()

	var main, free *Subject
	for _, s := range r.subjects {
		switch {
		case s.Plan == "free" && free == nil:
			free = s
		case s.Plan != "free" && main == nil:
			main = s
		}
	}
	if main == nil {
		main = r.subjects[0]
		r.note("no subject on a plan other than free: the operation rates run as %s, whose plan rate may refuse first", main.Name)
	}

	// A failed check is marked where it ended.
	mark := func(c Check) Check {
		if c.Verdict == Fail {
			c.FailedAt = secondsAt(time.Since(start).Seconds())
		}
		return c
	}
	rep.Checks = append(rep.Checks, mark(op.rateCheck(ctx, main, "SearchCatalog", searchCatalogPerMin, func(ctx context.Context, tg *Target, tok string) Result {
		_, res := unary[svcv1.SearchCatalogRequest, svcv1.SearchCatalogResponse](ctx, tg, svcv1connect.BlueprintServiceSearchCatalogProcedure, tok, &svcv1.SearchCatalogRequest{Query: "redis"}, nil)
		return res
	})))
	rep.Checks = append(rep.Checks, mark(op.rateCheck(ctx, main, "ValidateBlueprint", validateBlueprintPerMin, func(ctx context.Context, tg *Target, tok string) Result {
		_, res := unary[svcv1.ValidateBlueprintRequest, svcv1.ValidateBlueprintResponse](ctx, tg, svcv1connect.BlueprintServiceValidateBlueprintProcedure, tok,
			&svcv1.ValidateBlueprintRequest{Content: "name: shop\nservices:\n  web:\n    image: nginx:1.27\n"}, nil)
		return res
	})))
	envs, check := op.createEnvironmentCheck(ctx, main)
	rep.Checks = append(rep.Checks, mark(check))
	rep.Checks = append(rep.Checks, mark(op.streamsCheck(ctx, main, envs)))
	if free != nil {
		rep.Checks = append(rep.Checks, mark(op.quotaCheck(ctx, free)))
	} else {
		rep.Checks = append(rep.Checks, Check{Name: "free: concurrent environments", Expected: "2 created, the 3rd refused ENVIRONMENT_QUOTA_EXCEEDED",
			Observed: "no subject on plan free", Verdict: Skip})
	}
	close(done)
	<-progressDone
	rep.Elapsed = Seconds(time.Since(start))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r.note("the checks did not finish within -duration %v", r.o.Duration)
	}
	op.cleanup(ctx)
	rep.Timeline = op.tl.Series(int(math.Ceil(time.Since(start).Seconds())))
	return nil
}

// cleanup deletes what the run created, last first, even when ctx has
// ended (Ctrl-C, the duration).
func (o *ops) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	failed := 0
	for i := len(o.clean) - 1; i >= 0; i-- {
		if err := o.clean[i](ctx); err != nil {
			failed++
			o.r.logf("cleanup: %v", err)
		}
	}
	if failed > 0 {
		o.r.note("cleanup: %d of %d deletions failed (see the log)", failed, len(o.clean))
	} else {
		o.r.note("cleanup: deleted the %d environments and organizations the run created", len(o.clean))
	}
}

// rateCheck sends limit+2 calls one after another and expects the first
// limit admitted and the rest refused OPERATION_RATE_EXCEEDED, well formed.
func (o *ops) rateCheck(ctx context.Context, s *Subject, method string, limit int, call func(context.Context, *Target, string) Result) Check {
	c := Check{Name: method + " " + fmt.Sprint(limit) + "/min", Expected: fmt.Sprintf("%d admitted, then OPERATION_RATE_EXCEEDED", limit)}
	var ok, refused, failed, firstRefusal int
	var calls []timedCall
	reasons := map[string]int{}
	for i := 1; i <= limit+2 && ctx.Err() == nil; i++ {
		sentAt := time.Now()
		res := call(ctx, o.r.edge(), s.Token())
		out := o.count(sentAt, res)
		calls = append(calls, timedCall{sent: sentAt, answered: time.Now(), admitted: out == OK})
		switch out {
		case OK:
			ok++
		case Refused:
			refused++
			reasons[res.Reason]++
			if firstRefusal == 0 {
				firstRefusal = i
			}
			if !o.r.refusal(s.Name, res, RefusalRule{Reasons: operationReasons, Retry: true, RateHeaders: true}) {
				c.Problems = append(c.Problems, fmt.Sprintf("call %d: malformed refusal", i))
			}
		default:
			failed++
			c.Problems = append(c.Problems, fmt.Sprintf("call %d: %v", i, res.Err))
		}
	}
	c.Problems = append(c.Problems, judgeSequential(limit, calls)...)
	if refused == 0 {
		c.Problems = append(c.Problems, "nothing was refused")
	}
	c.Observed = fmt.Sprintf("%d admitted, %d refused%s %s", ok, refused, firstAt(firstRefusal), reasonList(reasons))
	c.Verdict = verdict(c.Problems, failed)
	return c
}

// timedCall is one of a sequence of calls: when it was sent, when its
// answer came, and whether it was admitted. The edge decided it somewhere
// between the two.
type timedCall struct {
	sent, answered time.Time
	admitted       bool
}

// judgeSequential judges an operation limit of limit per minute (burst
// equal to the rate, full for a new subject) on calls sent one after
// another, by when the edge can have admitted them rather than by when
// they were sent: a call sent early and served late (a loaded machine, a
// held call) counts at its answer. No margin is needed beyond that window:
// at most limit plus one call per emission interval between the first
// call's send and the last admitted call's answer (the widest span the
// edge's clock can have seen), and at least that many, up to the calls
// sent, between the first call's answer and the last call's send (the
// narrowest). It returns the reasons for a FAIL.
func judgeSequential(limit int, calls []timedCall) []string {
	if len(calls) == 0 {
		return nil
	}
	interval := time.Minute / time.Duration(limit)
	first, last := calls[0], calls[len(calls)-1]
	admitted := 0
	var lastAdmitted timedCall
	for _, c := range calls {
		if c.admitted {
			admitted++
			lastAdmitted = c
		}
	}
	var why []string
	if admitted > 0 {
		widest := lastAdmitted.answered.Sub(first.sent)
		if most := limit + int(widest/interval); admitted > most {
			why = append(why, fmt.Sprintf("admitted %d, more than allowed %d: the limit plus one per %v over the %.2fs from the first call's send to the last admitted call's answer",
				admitted, most, interval, widest.Seconds()))
		}
	}
	narrowest := max(last.sent.Sub(first.answered), 0)
	if least := min(limit+int(narrowest/interval), len(calls)); admitted < least {
		why = append(why, fmt.Sprintf("admitted %d of %d calls, fewer than allowed %d: the limit plus one per %v over the %.2fs from the first call's answer to the last call's send",
			admitted, len(calls), least, interval, narrowest.Seconds()))
	}
	return why
}

func firstAt(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf(" (from call %d)", i)
}

func reasonList(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func verdict(problems []string, failed int) string {
	if len(problems) > 0 || failed > 0 {
		return Fail
	}
	return Pass
}

// project creates an organization and a project as s and registers their
// deletion.
func (o *ops) project(ctx context.Context, s *Subject, name string) (string, error) {
	tok := s.Token
	org, res := unary[svcv1.CreateOrganizationRequest, svcv1.Organization](ctx, o.r.edge(), svcv1connect.OrganizationServiceCreateOrganizationProcedure, tok(),
		&svcv1.CreateOrganizationRequest{Name: name, DisplayName: "loadtest " + o.r.id, BillingEmail: "loadtest@example.com"}, nil)
	o.count(time.Now(), res)
	if res.Err != nil {
		return "", fmt.Errorf("create organization %s as %s: %w", name, s.Name, res.Err)
	}
	o.clean = append(o.clean, func(ctx context.Context) error {
		_, res := unary[svcv1.DeleteOrganizationRequest, svcv1.DeleteOrganizationResponse](ctx, o.r.edge(), svcv1connect.OrganizationServiceDeleteOrganizationProcedure, tok(),
			&svcv1.DeleteOrganizationRequest{OrganizationId: org.Id, Force: true}, nil)
		if res.Err != nil {
			return fmt.Errorf("delete organization %s: %w", name, res.Err)
		}
		return nil
	})
	prj, res := unary[svcv1.CreateProjectRequest, svcv1.Project](ctx, o.r.edge(), svcv1connect.OrganizationServiceCreateProjectProcedure, tok(),
		&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}, nil)
	o.count(time.Now(), res)
	if res.Err != nil {
		return "", fmt.Errorf("create project in %s as %s: %w", name, s.Name, res.Err)
	}
	return prj.Id, nil
}

// createEnvironment creates one environment and registers its deletion
// (through the edge, which releases its quota).
func (o *ops) createEnvironment(ctx context.Context, s *Subject, project, name string) (string, Result) {
	tok := s.Token
	sentAt := time.Now()
	out, res := unary[svcv1.CreateEnvironmentRequest, svcv1.CreateEnvironmentResponse](ctx, o.r.edge(), svcv1connect.EnvironmentServiceCreateEnvironmentProcedure, tok(),
		&svcv1.CreateEnvironmentRequest{Name: name, BlueprintId: blueprintID, ProjectId: project}, nil)
	o.count(sentAt, res)
	if res.Err != nil {
		return "", res
	}
	id := out.GetEnvironment().GetId()
	o.clean = append(o.clean, func(ctx context.Context) error {
		_, res := unary[svcv1.DeleteEnvironmentRequest, svcv1.DeleteEnvironmentResponse](ctx, o.r.edge(), svcv1connect.EnvironmentServiceDeleteEnvironmentProcedure, tok(),
			&svcv1.DeleteEnvironmentRequest{EnvironmentId: id}, nil)
		if res.Err != nil {
			return fmt.Errorf("delete environment %s: %w", id, res.Err)
		}
		return nil
	})
	return id, res
}

// createEnvironmentCheck creates an organization and a project, then
// limit+2 environments: the first 10 created, the rest refused
// OPERATION_RATE_EXCEEDED. It returns the environments created.
func (o *ops) createEnvironmentCheck(ctx context.Context, s *Subject) ([]string, Check) {
	c := Check{Name: fmt.Sprintf("CreateEnvironment %d/min", createEnvironmentPerMin),
		Expected: fmt.Sprintf("%d created, then OPERATION_RATE_EXCEEDED", createEnvironmentPerMin)}
	project, err := o.project(ctx, s, "lt-"+o.r.id+"-ops")
	if err != nil {
		c.Observed, c.Verdict, c.Problems = "could not set up", Fail, []string{err.Error()}
		return nil, c
	}
	var ids []string
	var refused, failed, firstRefusal int
	var calls []timedCall
	reasons := map[string]int{}
	for i := 1; i <= createEnvironmentPerMin+2 && ctx.Err() == nil; i++ {
		sentAt := time.Now()
		id, res := o.createEnvironment(ctx, s, project, fmt.Sprintf("e%d", i))
		calls = append(calls, timedCall{sent: sentAt, answered: time.Now(), admitted: res.outcome() == OK})
		switch res.outcome() {
		case OK:
			ids = append(ids, id)
		case Refused:
			refused++
			reasons[res.Reason]++
			if firstRefusal == 0 {
				firstRefusal = i
			}
			if !o.r.refusal(s.Name, res, RefusalRule{Reasons: operationReasons, Retry: true, RateHeaders: true}) {
				c.Problems = append(c.Problems, fmt.Sprintf("call %d: malformed refusal", i))
			}
		default:
			failed++
			c.Problems = append(c.Problems, fmt.Sprintf("call %d: %v", i, res.Err))
		}
	}
	c.Problems = append(c.Problems, judgeSequential(createEnvironmentPerMin, calls)...)
	if refused == 0 {
		c.Problems = append(c.Problems, "nothing was refused")
	}
	c.Observed = fmt.Sprintf("%d created, %d refused%s %s", len(ids), refused, firstAt(firstRefusal), reasonList(reasons))
	c.Verdict = verdict(c.Problems, failed)
	return ids, c
}

// streamsCheck opens WatchEnvironment streams on one environment as s:
// 20 must open (each gets the environment's state), the 21st must be
// refused CONCURRENT_STREAMS_EXCEEDED. All are closed afterwards.
func (o *ops) streamsCheck(ctx context.Context, s *Subject, envs []string) Check {
	c := Check{Name: "WatchEnvironment streams", Expected: fmt.Sprintf("%d open, the %dst refused CONCURRENT_STREAMS_EXCEEDED", streamsPerSubject, streamsPerSubject+1)}
	if len(envs) == 0 {
		c.Observed, c.Verdict = "no environment to watch", Fail
		return c
	}
	p := o.r.o.Protocol
	if !p.streams() {
		p = Connect
		c.Name += " (connect: http cannot stream)"
	}
	sctx, closeAll := context.WithCancel(ctx)
	defer closeAll()
	var streams []*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse]
	defer func() {
		for _, st := range streams {
			_ = st.Close()
		}
	}()
	opened, refusedAt := 0, 0
	var refusal string
	for i := 1; i <= streamsPerSubject+1 && ctx.Err() == nil; i++ {
		sentAt := time.Now()
		st, err := serverStream[svcv1.WatchEnvironmentRequest, svcv1.WatchEnvironmentResponse](sctx, o.r.edge(), p,
			svcv1connect.EnvironmentServiceWatchEnvironmentProcedure, s.Token(), &svcv1.WatchEnvironmentRequest{EnvironmentId: envs[0]})
		if err == nil {
			if st.Receive() {
				streams = append(streams, st)
				opened++
				o.count(sentAt, Result{})
				continue
			}
			err = st.Err()
			_ = st.Close()
			if err == nil {
				err = errors.New("the stream ended without a message")
			}
		}
		res := resultOf(err, nil)
		o.count(sentAt, res)
		if res.outcome() == Refused && refusedAt == 0 {
			refusedAt, refusal = i, res.Reason
			continue
		}
		c.Problems = append(c.Problems, fmt.Sprintf("stream %d: %v", i, err))
	}
	c.Observed = fmt.Sprintf("%d open", opened)
	if refusedAt > 0 {
		c.Observed += fmt.Sprintf(", stream %d refused %s", refusedAt, refusal)
	}
	if opened != streamsPerSubject {
		c.Problems = append(c.Problems, fmt.Sprintf("%d streams opened, want %d", opened, streamsPerSubject))
	}
	if refusedAt != streamsPerSubject+1 || refusal != "CONCURRENT_STREAMS_EXCEEDED" {
		c.Problems = append(c.Problems, fmt.Sprintf("want stream %d refused CONCURRENT_STREAMS_EXCEEDED", streamsPerSubject+1))
	}
	c.Verdict = verdict(c.Problems, 0)
	return c
}

// quotaCheck creates three environments as a free subject: two created,
// the third refused ENVIRONMENT_QUOTA_EXCEEDED with a QuotaFailure.
func (o *ops) quotaCheck(ctx context.Context, s *Subject) Check {
	c := Check{Name: "free: concurrent environments", Expected: fmt.Sprintf("%d created, the %drd refused ENVIRONMENT_QUOTA_EXCEEDED", freeConcurrentEnvs, freeConcurrentEnvs+1)}
	project, err := o.project(ctx, s, "lt-"+o.r.id+"-quota")
	if err != nil {
		c.Observed, c.Verdict, c.Problems = "could not set up", Fail, []string{err.Error()}
		return c
	}
	created, refusedAt := 0, 0
	var refusal string
	for i := 1; i <= freeConcurrentEnvs+1 && ctx.Err() == nil; i++ {
		_, res := o.createEnvironment(ctx, s, project, fmt.Sprintf("q%d", i))
		switch res.outcome() {
		case OK:
			created++
		case Refused:
			refusedAt, refusal = i, res.Reason
			if !o.r.refusal(s.Name, res, RefusalRule{Reasons: []string{"ENVIRONMENT_QUOTA_EXCEEDED"}, QuotaFailure: true, RateHeaders: true}) {
				c.Problems = append(c.Problems, "malformed refusal")
			}
		default:
			c.Problems = append(c.Problems, fmt.Sprintf("environment %d: %v", i, res.Err))
		}
	}
	c.Observed = fmt.Sprintf("%d created", created)
	if refusedAt > 0 {
		c.Observed += fmt.Sprintf(", environment %d refused %s", refusedAt, refusal)
	}
	if created != freeConcurrentEnvs || refusedAt != freeConcurrentEnvs+1 || refusal != "ENVIRONMENT_QUOTA_EXCEEDED" {
		c.Problems = append(c.Problems, fmt.Sprintf("want %d created and the %drd refused ENVIRONMENT_QUOTA_EXCEEDED", freeConcurrentEnvs, freeConcurrentEnvs+1))
	}
	c.Verdict = verdict(c.Problems, 0)
	return c
}
