package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdicts. INCONCLUSIVE is a run that proves nothing either way: the
// tool could not offer the load its verdict needs (it fell behind its
// schedule, calls were cut off, a plan was never pushed past its limit).
const (
	Pass         = "PASS"
	Fail         = "FAIL"
	Inconclusive = "INCONCLUSIVE"
	Skip         = "SKIP"
)

// Exit statuses.
const (
	exitPass         = 0
	exitFail         = 1 // FAIL, or the run could not start
	exitUsage        = 2
	exitInconclusive = 3
)

// exitStatus is the exit status of a verdict.
func exitStatus(verdict string) int {
	switch verdict {
	case Pass:
		return exitPass
	case Inconclusive:
		return exitInconclusive
	}
	return exitFail
}

// Report is a run's result: what the table, the JSON file and the chart
// show.
type Report struct {
	Scenario    string            `json:"scenario"`
	RunID       string            `json:"run_id"`
	Started     time.Time         `json:"started"`
	Duration    Seconds           `json:"duration_s"`
	Elapsed     Seconds           `json:"elapsed_s"`
	Protocol    Protocol          `json:"protocol"`
	Edges       []string          `json:"edges"`
	Backend     string            `json:"backend,omitempty"`
	Model       string            `json:"model,omitempty"` // open or closed
	Rate        float64           `json:"offered_rate_per_s,omitempty"`
	Concurrency int               `json:"concurrency,omitempty"`
	Subjects    []SubjectInfo     `json:"subjects"`
	Planned     int               `json:"planned_calls,omitempty"` // open model: calls the schedule planned
	Achieved    float64           `json:"achieved_rate_per_s,omitempty"`
	Verdict     string            `json:"verdict"`
	Because     []string          `json:"because,omitempty"` // why the verdict is not PASS, the edge's doing included
	Tolerance   string            `json:"tolerance,omitempty"`
	Totals      Totals            `json:"totals"`
	Plans       []PlanResult      `json:"plans,omitempty"`
	Checks      []Check           `json:"checks,omitempty"`
	Thresholds  []Check           `json:"thresholds,omitempty"`
	Edge        []EdgeActivity    `json:"edge_metrics,omitempty"` // what each replica's counters say it did
	Idempotency *IdempotencyStats `json:"idempotency,omitempty"`
	Overhead    *OverheadResult   `json:"overhead,omitempty"`
	Latency     *LatencySummary   `json:"latency,omitempty"`
	LatencyFrom string            `json:"latency_from,omitempty"` // what Latency measures from
	Timeline    []Series          `json:"timeline"`
	Replicas    []Series          `json:"per_replica,omitempty"` // conformance over several edges: each replica's calls
	Malformed   []string          `json:"malformed_examples,omitempty"`
	Notes       []string          `json:"notes,omitempty"`
}

// SubjectInfo names a subject (never its token).
type SubjectInfo struct {
	Name       string `json:"name"`
	Plan       string `json:"plan"`
	EdgeLimits string `json:"edge_limits"` // what GetUsage reported
}

// Totals counts every call of the run (setup and cleanup calls aside).
type Totals struct {
	Sent       int `json:"sent"`
	OK         int `json:"ok"`
	Refused    int `json:"refused"`
	Aborted    int `json:"aborted"`
	Failed     int `json:"errors"`
	Unfinished int `json:"unfinished"`
	Malformed  int `json:"malformed_refusals"`
}

// PlanResult is the conformance verdict for one plan's subjects together.
type PlanResult struct {
	Plan           Plan            `json:"plan"`
	Subjects       int             `json:"subjects"`
	Sent           int             `json:"sent"`
	Admitted       int             `json:"admitted"`
	Refused        int             `json:"refused"`
	Failed         int             `json:"errors"`
	Unfinished     int             `json:"unfinished"`
	Malformed      int             `json:"malformed_refusals"`
	Allowed        int             `json:"allowed"`
	Tolerance      int             `json:"tolerance"`
	AdmittedPerSec float64         `json:"admitted_per_s"`
	AllowedPerSec  float64         `json:"allowed_per_s"`
	RefusedPerSec  float64         `json:"refused_per_s"`
	SteadyPerMin   float64         `json:"second_half_admitted_per_min"`
	RatePerMin     int             `json:"limit_per_min"` // the plan's rate × subjects
	DailyReached   bool            `json:"daily_cap_reached"`
	Verdict        string          `json:"verdict"`
	Why            []string        `json:"why,omitempty"`
	FailedAt       *float64        `json:"failed_at_s,omitempty"` // seconds into the run where it first failed
	PerSubject     []SubjectResult `json:"per_subject"`
}

// SubjectResult is one subject's part of a PlanResult.
type SubjectResult struct {
	Name       string    `json:"name"`
	Sent       int       `json:"sent"`
	Admitted   int       `json:"admitted"`
	Refused    int       `json:"refused"`
	Failed     int       `json:"errors"`
	Unfinished int       `json:"unfinished"`
	Malformed  int       `json:"malformed_refusals"`
	Allowance  Allowance `json:"allowance"`
	Verdict    string    `json:"verdict"`
	Why        []string  `json:"why,omitempty"`
}

// Check is one verdict of the operations or idempotency scenario.
type Check struct {
	Name     string   `json:"name"`
	Expected string   `json:"expected"`
	Observed string   `json:"observed"`
	Verdict  string   `json:"verdict"`
	Problems []string `json:"problems,omitempty"`
	FailedAt *float64 `json:"failed_at_s,omitempty"` // seconds into the run where it failed, for the report's mark
}

// secondsAt is a point of the run, for FailedAt.
func secondsAt(s float64) *float64 { return &s }

// decide sets the run's verdict and what it names as the reasons: FAIL if
// any plan, check or threshold failed or any refusal was malformed; else
// INCONCLUSIVE if any was inconclusive; else PASS. A verdict other than
// PASS also names what the edges' counters say they did.
func (rep *Report) decide() {
	var fails, inconclusive []string
	add := func(v, who string, why []string, observed string) {
		if len(why) == 0 {
			why = []string{observed}
		}
		for _, w := range why {
			switch v {
			case Fail:
				fails = append(fails, who+": "+w)
			case Inconclusive:
				inconclusive = append(inconclusive, who+": "+w)
			}
		}
	}
	for _, p := range rep.Plans {
		add(p.Verdict, "plan "+p.Plan.Name, p.Why, "")
	}
	for _, c := range slices.Concat(rep.Checks, rep.Thresholds) {
		add(c.Verdict, c.Name, c.Problems, c.Observed)
	}
	if rep.Totals.Malformed > 0 {
		fails = append(fails, fmt.Sprintf("%d malformed refusals", rep.Totals.Malformed))
	}
	switch {
	case len(fails) > 0:
		rep.Verdict, rep.Because = Fail, fails
	case len(inconclusive) > 0:
		rep.Verdict, rep.Because = Inconclusive, inconclusive
	default:
		rep.Verdict, rep.Because = Pass, nil
		return
	}
	rep.Because = append(rep.Because, edgeCauses(rep.Edge)...)
}

// writeText prints the report as tables.
func (rep *Report) writeText(w io.Writer) {
	fmt.Fprintf(w, "loadtest %s  run %s  protocol %s  edge %s", rep.Scenario, rep.RunID, rep.Protocol, strings.Join(rep.Edges, ","))
	if rep.Backend != "" {
		fmt.Fprintf(w, "  backend %s", rep.Backend)
	}
	fmt.Fprintf(w, "\nstarted %s  duration %s  elapsed %.1fs", rep.Started.Format(time.RFC3339), time.Duration(rep.Duration), time.Duration(rep.Elapsed).Seconds())
	switch rep.Model {
	case "open":
		fmt.Fprintf(w, "  open model %.0f/s", rep.Rate)
	case "closed":
		fmt.Fprintf(w, "  closed model, %d workers", rep.Concurrency)
	}
	fmt.Fprintf(w, "  subjects %d\n", len(rep.Subjects))
	t := rep.Totals
	fmt.Fprintf(w, "calls: sent %d  ok %d  refused %d  aborted %d  errors %d  unfinished %d  malformed refusals %d\n",
		t.Sent, t.OK, t.Refused, t.Aborted, t.Failed, t.Unfinished, t.Malformed)
	if rep.Planned > 0 {
		fmt.Fprintf(w, "load: planned %d calls (%.1f/s), sent %d (%.1f/s, %.0f%%)\n",
			rep.Planned, rep.Rate, t.Sent, rep.Achieved, 100*float64(t.Sent)/float64(rep.Planned))
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(rep.Plans) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "PLAN\tLIMIT\tSUBJ\tSENT\tADMITTED\tREFUSED\tERR\tMALFORMED\tALLOWED\t±TOL\tADMITTED/S\tALLOWED/S\t2ND HALF/MIN\tLIMIT/MIN\tVERDICT")
		for _, p := range rep.Plans {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.1f\t%d\t%s\n",
				p.Plan.Name, p.Plan.Limit(), p.Subjects, p.Sent, p.Admitted, p.Refused, p.Failed+p.Unfinished, p.Malformed,
				p.Allowed, p.Tolerance, p.AdmittedPerSec, p.AllowedPerSec, p.SteadyPerMin, p.RatePerMin, p.Verdict)
		}
		_ = tw.Flush()
		fmt.Fprintf(w, "\nallowed: per subject, the burst left after the GetUsage probe + one request per emission interval from the probe to its last send (capped by the daily cap left)\n"+
			"tolerance: %s\n2nd half/min: admitted per minute over the second half of the run, the steady rate once bursts are spent (coarse in short runs), against limit/min = rate × subjects\n", rep.Tolerance)
		for _, p := range rep.Plans {
			for _, why := range p.Why {
				fmt.Fprintf(w, "  %s: %s\n", p.Plan.Name, why)
			}
		}
	}
	if len(rep.Checks) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "CHECK\tEXPECTED\tOBSERVED\tVERDICT")
		for _, c := range rep.Checks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Expected, c.Observed, c.Verdict)
		}
		_ = tw.Flush()
		for _, c := range rep.Checks {
			for _, p := range c.Problems {
				fmt.Fprintf(w, "  %s: %s\n", c.Name, p)
			}
		}
	}
	if len(rep.Thresholds) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "THRESHOLD\tLIMIT\tOBSERVED\tVERDICT")
		for _, c := range rep.Thresholds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Expected, c.Observed, c.Verdict)
		}
		_ = tw.Flush()
	}
	if s := rep.Idempotency; s != nil {
		fmt.Fprintf(w, "\nkeys %d × %d duplicates: answered %d (first %d, replayed %d), aborted (IDEMPOTENCY_KEY_IN_USE) %d, refused by limits %d, other errors %d\n",
			s.Keys, s.Duplicates, s.Answered, s.First, s.Replayed, s.Aborted, s.Refused, s.Other)
		fmt.Fprintf(w, "backend executions per key: %s\n", s.executionsText())
		fmt.Fprintf(w, "late duplicates (one per key, after the storm): replayed with the same answer %d of %d\n", s.LateReplayed, s.Keys)
	}
	if o := rep.Overhead; o != nil {
		fmt.Fprintf(w, "\n%s, the same calls straight to the backend and through the edge, alternating\n", o.Call)
		fmt.Fprintln(tw, "TARGET\tCALLS\tOK\tREFUSED\tERR\tOK/S\tP50\tP90\tP99\tP99.9\tMAX\tMEAN")
		for _, l := range []TargetLatency{o.Backend, o.Edge} {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Target, l.Calls, l.OK, l.Refused, l.Failed, l.OKPerSec,
				micros(l.Latency.P50), micros(l.Latency.P90), micros(l.Latency.P99), micros(l.Latency.P999), micros(l.Latency.Max), micros(int64(l.Latency.Mean)))
		}
		a := o.Added
		fmt.Fprintf(tw, "edge adds\t\t\t\t\t%+.1f\t%s\t%s\t%s\t%s\t\t\n", o.Edge.OKPerSec-o.Backend.OKPerSec,
			signedMicros(a.P50), signedMicros(a.P90), signedMicros(a.P99), signedMicros(a.P999))
		fmt.Fprintf(tw, "edge / backend\t\t\t\t\t\t×%.2f\t×%.2f\t×%.2f\t×%.2f\t\t\n", o.Ratio.P50, o.Ratio.P90, o.Ratio.P99, o.Ratio.P999)
		_ = tw.Flush()
		fmt.Fprintf(w, "latency from the intended send time (open model) or the send (closed model) to the answer; OK answers only\n")
	}
	if rep.Latency != nil && rep.Latency.Count > 0 {
		l := rep.Latency
		fmt.Fprintf(w, "\nlatency (%s): p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
			rep.LatencyFrom, micros(l.P50), micros(l.P90), micros(l.P99), micros(l.P999), micros(l.Max))
	}
	if len(rep.Malformed) > 0 {
		fmt.Fprintf(w, "\nmalformed refusals (%d; first %d):\n", rep.Totals.Malformed, len(rep.Malformed))
		for _, m := range rep.Malformed {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	if len(rep.Edge) > 0 {
		fmt.Fprintf(w, "\nthe edge during the run (its /metrics before and after; counters of the whole replica):\n")
		for _, a := range rep.Edge {
			switch {
			case a.Error != "":
				fmt.Fprintf(w, "  %s (%s): not read: %s\n", a.Edge, a.Admin, a.Error)
			case len(a.Said) == 0:
				fmt.Fprintf(w, "  %s (%s): closed no connection, held no call, answered nothing unavailable, no fail-open decision\n", a.Edge, a.Admin)
			}
			for _, said := range a.Said {
				fmt.Fprintf(w, "  %s %s\n", a.Edge, said)
			}
		}
	}
	fmt.Fprintf(w, "\nVERDICT %s\n", rep.Verdict)
	for _, b := range rep.Because {
		fmt.Fprintf(w, "  because %s\n", b)
	}
}

func signedMicros(us int64) string {
	if us < 0 {
		return "-" + micros(-us)
	}
	return "+" + micros(us)
}

// outputPaths returns where the JSON report and the HTML report go: -out
// and the same name with .html, or loadtest-results/<scenario>-<time>.json.
func outputPaths(out, scenario string, started time.Time) (string, string) {
	if out == "" {
		out = filepath.Join("loadtest-results", fmt.Sprintf("%s-%s.json", scenario, started.Format("20060102-150405")))
	}
	return out, strings.TrimSuffix(out, filepath.Ext(out)) + ".html"
}

// writeFiles writes the JSON report and the HTML report.
func (rep *Report) writeFiles(jsonPath, htmlPath string) error {
	for _, p := range []string{jsonPath, htmlPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	var page bytes.Buffer
	if err := rep.writeHTML(&page); err != nil {
		return err
	}
	return os.WriteFile(htmlPath, page.Bytes(), 0o644)
}
