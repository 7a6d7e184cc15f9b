package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// IdempotencyStats counts an idempotency run.
type IdempotencyStats struct {
	Keys       int `json:"keys"`
	Duplicates int `json:"duplicates_per_key"`
	// Storm answers: Answered = First + Replayed.
	Answered int `json:"answered"`
	First    int `json:"first"`
	Replayed int `json:"replayed"`
	Aborted  int `json:"aborted_in_use"`
	Refused  int `json:"refused_by_limits"`
	Other    int `json:"other_errors"`
	// AlreadyExists counts answers in which the backend refused a second
	// execution (the name was taken by the first): each is an execution
	// the edge should have prevented.
	AlreadyExists int `json:"already_exists"`
	// DifferentAnswers counts answered duplicates whose organization differs
	// from the key's first answer.
	DifferentAnswers int `json:"different_answers"`
	// Executions maps "executions per key" to how many keys had that many.
	Executions   map[string]int `json:"executions_per_key"`
	LateReplayed int            `json:"late_duplicates_replayed"`
}

func (s *IdempotencyStats) executionsText() string {
	var parts []string
	keys := make([]int, 0, len(s.Executions))
	for k := range s.Executions {
		n, _ := strconv.Atoi(k)
		keys = append(keys, n)
	}
	sort.Ints(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d execution(s): %d keys", k, s.Executions[strconv.Itoa(k)]))
	}
	return strings.Join(parts, ", ")
}

// idemKey is one key's storm.
type idemKey struct {
	s       *Subject
	key     string
	name    string
	mu      sync.Mutex
	orgID   string // the first answer's organization
	exists  int    // already_exists answers
	answers int
}

func runIdempotency(ctx context.Context, r *runner, rep *Report) error {
	o := r.o
	start := time.Now()
	tl := newTimeline(start)
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	done, progressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(done, o.Progress, &r.meter, start, o.Duration, 0)
	}()
	st := &IdempotencyStats{Keys: o.Keys, Duplicates: o.Duplicates, Executions: map[string]int{}}
	rep.Idempotency = st
	var mu sync.Mutex // guards st
	lat := newLatency()

	keys := make([]*idemKey, o.Keys)
	for i := range keys {
		keys[i] = &idemKey{s: r.subjects[i%len(r.subjects)], key: fmt.Sprintf("loadtest-%s-%d", r.id, i+1), name: fmt.Sprintf("lt-%s-k%d", r.id, i+1)}
	}
	create := func(k *idemKey) (string, Result) {
		h := http.Header{"Idempotency-Key": {k.key}}
		org, res := unary[svcv1.CreateOrganizationRequest, svcv1.Organization](ctx, r.edge(), svcv1connect.OrganizationServiceCreateOrganizationProcedure, k.s.Token(),
			&svcv1.CreateOrganizationRequest{Name: k.name, DisplayName: "loadtest idempotency", BillingEmail: "loadtest@example.com"}, h)
		return org.GetId(), res
	}

	// Storms in waves, so that every duplicate of a key is in flight at once
	// within the in-flight bound.
	wave := max(1, o.MaxInFlight/o.Duplicates)
	for lo := 0; lo < len(keys) && ctx.Err() == nil; lo += wave {
		batch := keys[lo:min(lo+wave, len(keys))]
		var ready, wg sync.WaitGroup
		fire := make(chan struct{})
		for _, k := range batch {
			for range o.Duplicates {
				ready.Add(1)
				wg.Go(func() {
					ready.Done()
					<-fire
					sentAt := time.Now()
					r.meter.sent.Add(1)
					id, res := create(k)
					out := res.outcome()
					r.meter.add(out)
					tl.Add("CreateOrganization", sentAt, out, time.Since(sentAt))
					lat.Record(time.Since(sentAt))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case out == OK:
						st.Answered++
						if res.X.Header.Get("Idempotent-Replayed") == "true" {
							st.Replayed++
						} else {
							st.First++
						}
						k.mu.Lock()
						if k.orgID == "" {
							k.orgID = id
						} else if k.orgID != id {
							st.DifferentAnswers++
						}
						k.answers++
						k.mu.Unlock()
					case out == Aborted:
						st.Aborted++
					case res.Code == connect.CodeAlreadyExists:
						st.AlreadyExists++
						k.mu.Lock()
						k.exists++
						k.mu.Unlock()
					case out == Refused:
						st.Refused++
						r.refusal(k.s.Name, res, rateRefusal)
					default:
						st.Other++
						if st.Other <= 3 {
							r.note("%s: %v", k.key, res.Err)
						}
					}
				})
			}
		}
		ready.Wait()
		close(fire)
		wg.Wait()
	}

	// One late duplicate per key: the first answer has ended, so it must
	// be replayed, never aborted, and name the same organization.
	var wg sync.WaitGroup
	sem := make(chan struct{}, min(o.MaxInFlight, 32))
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sentAt := time.Now()
			r.meter.sent.Add(1)
			id, res := create(k)
			out := res.outcome()
			r.meter.add(out)
			tl.Add("CreateOrganization", sentAt, out, time.Since(sentAt))
			k.mu.Lock()
			first := k.orgID
			k.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if out == OK && res.X.Header.Get("Idempotent-Replayed") == "true" && id == first && first != "" {
				st.LateReplayed++
			} else if out != OK {
				r.note("late duplicate of %s: %v", k.key, res.Err)
			}
		})
	}
	wg.Wait()
	close(done)
	<-progressDone
	rep.Elapsed = Seconds(time.Since(start))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r.note("the storms did not finish within -duration %v", o.Duration)
	}

	// Count executions: organizations of each key's name among each
	// subject's organizations, plus second executions the backend refused.
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer lcancel()
	listed, ids, err := listOrganizations(lctx, r, "lt-"+r.id+"-k")
	if err != nil {
		rep.Checks = append(rep.Checks, Check{Name: "backend executions per key", Expected: "1", Observed: "could not list", Verdict: Fail, Problems: []string{err.Error()}})
	}
	var problems []string
	for _, k := range keys {
		n := listed[k.name] + k.exists
		st.Executions[strconv.Itoa(n)]++
		if n != 1 && len(problems) < 5 {
			problems = append(problems, fmt.Sprintf("%s: %d organizations listed, %d already_exists answers", k.key, listed[k.name], k.exists))
		}
	}
	if err == nil {
		rep.Checks = append(rep.Checks, Check{Name: "backend executions per key", Expected: fmt.Sprintf("exactly 1 for each of %d keys", o.Keys),
			Observed: st.executionsText(), Verdict: verdict(problems, 0), Problems: problems})
	}
	var answerProblems []string
	if st.DifferentAnswers > 0 {
		answerProblems = append(answerProblems, fmt.Sprintf("%d duplicates answered another organization than the key's first answer", st.DifferentAnswers))
	}
	if st.Other > 0 {
		answerProblems = append(answerProblems, fmt.Sprintf("%d duplicates got neither the answer nor aborted", st.Other))
	}
	if st.Refused > 0 {
		r.note("%d calls were refused by rate limits before reaching the idempotency step: give fewer -keys per subject or more subjects", st.Refused)
	}
	rep.Checks = append(rep.Checks,
		Check{Name: "duplicates during the storm", Expected: "the first answer (replayed) or aborted IDEMPOTENCY_KEY_IN_USE",
			Observed: fmt.Sprintf("%d answered (%d replayed), %d aborted, %d other", st.Answered, st.Replayed, st.Aborted, st.Other+st.AlreadyExists),
			Verdict:  verdict(answerProblems, 0), Problems: answerProblems},
		Check{Name: "late duplicate per key", Expected: fmt.Sprintf("%d replayed (Idempotent-Replayed: true, same organization)", o.Keys),
			Observed: fmt.Sprintf("%d replayed", st.LateReplayed), Verdict: verdict(nil, o.Keys-st.LateReplayed)})
	s := lat.Summary()
	rep.Latency, rep.LatencyFrom = &s, "storm calls, from the send"
	rep.Timeline = tl.Series(int(math.Ceil(time.Since(start).Seconds())))

	cleanupOrganizations(ctx, r, ids)
	return nil
}

// listOrganizations counts, by name, the organizations whose name starts
// with prefix among every subject's, and returns their ids by subject.
func listOrganizations(ctx context.Context, r *runner, prefix string) (map[string]int, map[*Subject][]string, error) {
	count := map[string]int{}
	ids := map[*Subject][]string{}
	for _, s := range r.subjects {
		token := ""
		for {
			out, res := unary[svcv1.ListOrganizationsRequest, svcv1.ListOrganizationsResponse](ctx, r.edge(), svcv1connect.OrganizationServiceListOrganizationsProcedure, s.Token(),
				&svcv1.ListOrganizationsRequest{PageSize: 1000, PageToken: token}, nil)
			if res.Err != nil {
				return count, ids, fmt.Errorf("list organizations of %s: %w", s.Name, res.Err)
			}
			for _, org := range out.Organizations {
				if strings.HasPrefix(org.Name, prefix) {
					count[org.Name]++
					ids[s] = append(ids[s], org.Id)
				}
			}
			if token = out.NextPageToken; token == "" {
				break
			}
		}
	}
	return count, ids, nil
}

func cleanupOrganizations(ctx context.Context, r *runner, ids map[*Subject][]string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	failed, total := 0, 0
	for s, list := range ids {
		for _, id := range list {
			total++
			_, res := unary[svcv1.DeleteOrganizationRequest, svcv1.DeleteOrganizationResponse](ctx, r.edge(), svcv1connect.OrganizationServiceDeleteOrganizationProcedure, s.Token(),
				&svcv1.DeleteOrganizationRequest{OrganizationId: id, Force: true}, nil)
			if res.Err != nil {
				failed++
				r.logf("cleanup: delete organization %s: %v", id, res.Err)
			}
		}
	}
	if failed > 0 {
		r.note("cleanup: %d of %d organizations could not be deleted", failed, total)
	} else {
		r.note("cleanup: deleted the %d organizations the run created", total)
	}
}
