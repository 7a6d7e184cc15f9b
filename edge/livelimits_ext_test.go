package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
)

const (
	searchCatalog     = "/svc.v1.BlueprintService/SearchCatalog"
	validateBlueprint = "/svc.v1.BlueprintService/ValidateBlueprint"
)

// liveChange is one customer calling faster than its limit while a reload
// changes that limit.
type liveChange struct {
	plan        string // the subject's plan (its own, through subject_plans)
	procedure   string
	before      config.Plan
	after       config.Plan
	opBefore    int // the procedure's rate_per_minute, if it has one
	opAfter     int
	atOnce      int           // what the new numbers admit at once, from the limit
	interval    time.Duration // the new numbers' emission interval (0: a daily cap, no refill)
	description string
}

// Every kind of limit raised and lowered by a reload while its subject
// calls back to back and sits at its limit: from the moment the reload
// returns, the subject's admitted calls follow the new numbers. What it
// spent stays spent; the new numbers decide how much it may hold and how
// fast it comes back. Over a window W after the reload a subject at its
// limit is admitted atOnce + W/interval calls (GCRA: what the bucket's new
// capacity leaves it, then one per interval), give or take one interval at
// each end of the window (a call in flight at either end); and a refusal of
// a rate never asks to wait longer than one new interval. (The period of a
// rate is a minute in the configuration: edge/ratelimit's tests change it.)
//
// The rates are at most one a second, so that a client on a loaded machine
// still calls faster than them. The case is the first: pro 300 ->
// 600/min locked its busy customers out for burst x (old - new interval).
func TestALimitChangedByAReloadAppliesAtOnceToCustomersAtTheirLimit(t *testing.T) {
	t.Parallel()
	roomy := config.Plan{RequestsPerMinute: 60_000, Burst: 1_000}
	daily := func(n int) config.Plan {
		return config.Plan{RequestsPerMinute: 60_000, Burst: 1_000, RequestsPerDay: config.Count(n)}
	}
	changes := []liveChange{
		{plan: "rateup", procedure: listOrgs, before: config.Plan{RequestsPerMinute: 12, Burst: 5}, after: config.Plan{RequestsPerMinute: 60, Burst: 5},
			interval: time.Second, description: "plan rate 12 -> 60/min, burst 5"},
		{plan: "ratedown", procedure: listOrgs, before: config.Plan{RequestsPerMinute: 60, Burst: 10}, after: config.Plan{RequestsPerMinute: 12, Burst: 10},
			interval: 5 * time.Second, description: "plan rate 60 -> 12/min, burst 10"},
		{plan: "burstup", procedure: listOrgs, before: config.Plan{RequestsPerMinute: 60, Burst: 3}, after: config.Plan{RequestsPerMinute: 60, Burst: 10},
			atOnce: 7, interval: time.Second, description: "plan burst 3 -> 10, 60/min"},
		{plan: "burstdown", procedure: listOrgs, before: config.Plan{RequestsPerMinute: 60, Burst: 10}, after: config.Plan{RequestsPerMinute: 60, Burst: 2},
			interval: time.Second, description: "plan burst 10 -> 2, 60/min"},
		{plan: "opup", procedure: searchCatalog, before: roomy, after: roomy, opBefore: 3, opAfter: 12,
			atOnce: 9, interval: 5 * time.Second, description: "SearchCatalog 3 -> 12/min (burst the rate)"},
		{plan: "opdown", procedure: validateBlueprint, before: roomy, after: roomy, opBefore: 12, opAfter: 3,
			interval: 20 * time.Second, description: "ValidateBlueprint 12 -> 3/min (burst the rate)"},
		{plan: "dailyup", procedure: listOrgs, before: daily(5), after: daily(15), atOnce: 10, description: "daily cap 5 -> 15"},
		{plan: "dailydown", procedure: listOrgs, before: daily(10), after: daily(6), description: "daily cap 10 -> 6"},
	}
	subjects := map[string]string{} // plan -> sub
	var tokens []string
	policy := func(c *config.Config, after bool) {
		c.OIDC.PlanClaim = "contract_plan" // tokens lack it: subject_plans decides
		c.Limits.Plans = map[string]config.Plan{"free": {RequestsPerMinute: 60, Burst: 100}}
		c.Limits.SubjectPlans = map[string]string{}
		for _, ch := range changes {
			p, op := ch.before, ch.opBefore
			if after {
				p, op = ch.after, ch.opAfter
			}
			c.Limits.Plans[ch.plan] = p
			if sub, ok := subjects[ch.plan]; ok {
				c.Limits.SubjectPlans[sub] = ch.plan
			}
			if op > 0 {
				for i := range c.Operations {
					if c.Operations[i].Procedure == ch.procedure {
						c.Operations[i].RatePerMinute = op
					}
				}
			}
		}
	}
	s := startFromFile(t, func(c *config.Config) { policy(c, false) })
	for _, ch := range changes {
		tok := s.token("free-live-" + ch.plan)
		tokens = append(tokens, tok)
		subjects[ch.plan] = subjectOf(t, tok)
	}
	before := *s.edge.Config
	policy(&before, false) // now with subject_plans
	writeConfig(t, s.path, &before)
	if err := s.edge.App.Reload(ctxT(t), s.path); err != nil {
		t.Fatal(err)
	}

	// Load: each subject calls one call after another, callGap apart.
	type answer struct {
		sent, at   time.Time
		admitted   bool
		retryAfter string
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answers := make([][]answer, len(changes))
	var mu sync.Mutex
	atLimit := make(chan int, len(changes))
	var wg sync.WaitGroup
	for i, ch := range changes {
		wg.Go(func() {
			refused := false
			for ctx.Err() == nil {
				sent := time.Now()
				code, h, err := callStatus(ctx, s.edge.URL, tokens[i], ch.procedure)
				now := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: %v", ch.description, err)
					}
					return
				}
				if code >= 500 {
					t.Errorf("%s: status %d", ch.description, code)
				}
				a := answer{sent: sent, at: now, admitted: code != http.StatusTooManyRequests}
				if !a.admitted {
					a.retryAfter = h.Get("Retry-After")
					if !refused {
						refused = true
						atLimit <- i
					}
				}
				mu.Lock()
				answers[i] = append(answers[i], a)
				mu.Unlock()
				// 40 calls a second, many more than any limit here
				// admits: a refill waits at most 25 ms for its call, and
				// eight subjects do not take the machine's every core.
				select {
				case <-ctx.Done():
				case <-time.After(callGap):
				}
			}
		})
	}
	deadline := time.After(time.Minute)
	for range changes {
		select {
		case <-atLimit:
		case <-deadline:
			t.Fatal("after a minute of calls not every subject has been refused at its limit")
		}
	}

	after := *s.edge.Config
	policy(&after, true)
	writeConfig(t, s.path, &after)
	if err := s.edge.App.Reload(ctxT(t), s.path); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	// The window being measured: the load runs on meanwhile.
	<-time.After(10 * time.Second)
	end := time.Now()
	cancel()
	wg.Wait()

	// Calls answered within the window. One in flight at the reload may
	// have run under the policy it started with; a call sent after it
	// cannot have. sent counts only the calls sent after the reload: a
	// slow machine's client may send fewer than the new limit admits, and
	// then each of those must be admitted, but a call in flight at the
	// reload may have been refused under the old policy.
	w := end.Sub(changed)
	for i, ch := range changes {
		got, sent := 0, 0
		for _, a := range answers[i] {
			if !a.at.After(changed) || a.at.After(end) {
				continue
			}
			if a.sent.After(changed) {
				sent++
			}
			if a.admitted {
				got++
				continue
			}
			if !a.sent.After(changed) {
				continue
			}
			if retry, err := strconv.Atoi(a.retryAfter); ch.interval > 0 && (err != nil || time.Duration(retry)*time.Second > ch.interval.Round(time.Second)) {
				t.Errorf("%s: a call sent %v after the reload was refused with Retry-After %q, want at most the new interval %v", ch.description, a.sent.Sub(changed).Round(time.Millisecond), a.retryAfter, ch.interval)
			}
		}
		want := ch.atOnce
		if ch.interval == 0 {
			// Fewer only if the client sent fewer: it is the machine.
			if got > want || got < min(want, sent) {
				t.Errorf("%s: %d calls admitted (%d sent after it) in the %v after the reload, want exactly %d", ch.description, got, sent, w.Round(time.Millisecond), want)
			}
			continue
		}
		want += int(w / ch.interval)
		// Fewer only if the client sent fewer: it is the machine, not the limit.
		if got < min(want-2, sent) || got > want+2 {
			t.Errorf("%s: %d calls admitted (%d sent after it) in the %v after the reload, want %d (%d at once, then one every %v) give or take 2",
				ch.description, got, sent, w.Round(time.Millisecond), want, ch.atOnce, ch.interval)
		}
	}
}

// callGap is the pause between one subject's calls in the load above.
const callGap = 25 * time.Millisecond

// callStatus posts {} to procedure as plain HTTP/JSON and returns the
// status and headers.
func callStatus(ctx context.Context, base, token, procedure string) (int, http.Header, error) {
	r, err := http.NewRequestWithContext(ctx, "POST", base+procedure, strings.NewReader("{}"))
	if err != nil {
		return 0, nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", procedure, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, res.Header, nil
}
