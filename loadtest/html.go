package main

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// The report page draws its charts with Apache ECharts, embedded whole
// (web/README.md): one self-contained file that opens offline, as k6's and
// vegeta's HTML reports do, with a charting library that handles axes,
// legends, tooltips and marks instead of hand-placed SVG. Go builds each
// chart's ECharts option; the page only hands them to the library, which
// draws SVG (so a headless browser's DOM shows what was drawn).
//
//go:embed web/echarts.common.min.js
var echartsJS string

// echartsVersion is the embedded library's version (web/README.md).
const echartsVersion = "6.1.0"

// chartSpec is one chart of the page: the id of its element, its title
// and its ECharts option.
type chartSpec struct {
	ID     string         `json:"id"`
	Title  string         `json:"title"`
	Option map[string]any `json:"option"`
}

// mark is a failed (or inconclusive) plan, check or threshold, marked on
// the time axes where it failed.
type mark struct {
	At      float64
	Label   string
	Verdict string
}

// marks lists what did not pass, each where it failed or, when that is not
// known, at the end of the run.
func (rep *Report) marks() []mark {
	end := time.Duration(rep.Elapsed).Seconds()
	for _, s := range rep.Timeline {
		end = max(end, float64(len(s.Buckets)))
	}
	at := func(p *float64) float64 {
		if p != nil {
			return *p
		}
		return end
	}
	var out []mark
	for _, p := range rep.Plans {
		if p.Verdict == Fail || p.Verdict == Inconclusive {
			out = append(out, mark{at(p.FailedAt), p.Verdict + " plan " + p.Plan.Name, p.Verdict})
		}
	}
	for _, c := range append(append([]Check(nil), rep.Checks...), rep.Thresholds...) {
		if c.Verdict == Fail || c.Verdict == Inconclusive {
			out = append(out, mark{at(c.FailedAt), c.Verdict + " " + c.Name, c.Verdict})
		}
	}
	return out
}

// markLines is the ECharts markLine of the marks, one vertical line each.
func markLines(marks []mark) map[string]any {
	var data []any
	for _, m := range marks {
		colour := "#d62728"
		if m.Verdict == Inconclusive {
			colour = "#ff9f1c"
		}
		data = append(data, map[string]any{
			"xAxis": m.At, "name": m.Label,
			"lineStyle": map[string]any{"color": colour, "width": 2, "type": "solid"},
			"label":     map[string]any{"formatter": m.Label, "color": colour, "position": "insideEndTop"},
		})
	}
	return map[string]any{"symbol": "none", "silent": true, "data": data}
}

// charts builds the page's charts from the report.
func (rep *Report) charts() []chartSpec {
	marks := rep.marks()
	var out []chartSpec
	end := 1
	for _, s := range rep.Timeline {
		end = max(end, len(s.Buckets))
	}
	// Every time axis spans the whole run, so the charts line up.
	timeAxis := func(name string) map[string]any {
		return map[string]any{"type": "value", "name": name, "min": 0, "max": end, "nameLocation": "middle", "nameGap": 28}
	}
	base := func(title, yName string) map[string]any {
		return map[string]any{
			"animation": false,
			"title":     map[string]any{"text": title, "left": "center", "textStyle": map[string]any{"fontSize": 14}},
			"tooltip":   map[string]any{"trigger": "axis"},
			"legend":    map[string]any{"top": 26, "type": "scroll"},
			"grid":      map[string]any{"left": 70, "right": 30, "top": 70, "bottom": 50},
			"xAxis":     timeAxis("seconds into the run"),
			"yAxis":     map[string]any{"type": "value", "name": yName},
		}
	}
	// A series shows its points when they are few: a one-second run is a
	// point, not a flat line.
	line := func(name string, data [][2]float64, extra map[string]any) map[string]any {
		s := map[string]any{"name": name, "type": "line", "data": data, "showSymbol": len(data) <= 30, "symbolSize": 6}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	withMarks := func(series []any) []any {
		if len(marks) > 0 && len(series) > 0 {
			series[0].(map[string]any)["markLine"] = markLines(marks)
		}
		return series
	}

	// Latency over time, every group.
	var latency []any
	for _, s := range rep.Timeline {
		var p50, p99 [][2]float64
		for i, l := range s.Latency {
			if l.Count > 0 {
				p50 = append(p50, [2]float64{float64(i) + 0.5, float64(l.P50) / 1000})
				p99 = append(p99, [2]float64{float64(i) + 0.5, float64(l.P99) / 1000})
			}
		}
		latency = append(latency, line("p50 "+s.Group, p50, nil), line("p99 "+s.Group, p99, map[string]any{"lineStyle": map[string]any{"type": "dashed"}}))
	}
	if len(latency) > 0 {
		o := base("Latency of answered calls, per second of sending (ms)", "ms")
		o["series"] = withMarks(latency)
		out = append(out, chartSpec{ID: "chart-latency", Title: "Latency over time", Option: o})
	}

	// Admitted against allowed, per plan.
	for _, p := range rep.Plans {
		for _, s := range rep.Timeline {
			if s.Group != p.Plan.Name || s.Allowed == nil {
				continue
			}
			admitted, refused := [][2]float64{{0, 0}}, [][2]float64{{0, 0}}
			allowed := [][2]float64{{0, float64(p.Subjects * p.Plan.Burst)}}
			sumOK, sumRef := 0, 0
			for i, b := range s.Buckets {
				sumOK, sumRef = sumOK+b.OK, sumRef+b.Refused
				admitted = append(admitted, [2]float64{float64(i + 1), float64(sumOK)})
				refused = append(refused, [2]float64{float64(i + 1), float64(sumRef)})
				if i < len(s.Allowed) {
					allowed = append(allowed, [2]float64{float64(i + 1), s.Allowed[i]})
				}
			}
			o := base(fmt.Sprintf("plan %s (%s) × %d subjects: admitted %d, allowed %d ±%d, refused %d: %s",
				p.Plan.Name, p.Plan.Limit(), p.Subjects, p.Admitted, p.Allowed, p.Tolerance, p.Refused, p.Verdict), "calls in all")
			o["series"] = withMarks([]any{
				line("admitted", admitted, map[string]any{"color": "#2a9d4b"}),
				line("allowed (burst + rate × t)", allowed, map[string]any{"color": "#1f5fbf", "lineStyle": map[string]any{"type": "dashed"}}),
				line("refused", refused, map[string]any{"color": "#d62728"}),
			})
			out = append(out, chartSpec{ID: "chart-plan-" + p.Plan.Name, Title: "plan " + p.Plan.Name + ": admitted vs allowed", Option: o})
		}
	}

	// Calls per second, every group.
	var calls []any
	for _, s := range rep.Timeline {
		var ok, ref, failed [][2]float64
		anyFailed := false
		for i, b := range s.Buckets {
			x := float64(i) + 0.5
			ok = append(ok, [2]float64{x, float64(b.OK)})
			ref = append(ref, [2]float64{x, float64(b.Refused)})
			failed = append(failed, [2]float64{x, float64(b.Failed)})
			anyFailed = anyFailed || b.Failed > 0
		}
		calls = append(calls, line("admitted "+s.Group, ok, nil), line("refused "+s.Group, ref, nil))
		if anyFailed {
			calls = append(calls, line("errors "+s.Group, failed, nil))
		}
		if len(s.Limit) > 0 {
			var limit [][2]float64
			for i, v := range s.Limit {
				limit = append(limit, [2]float64{float64(i) + 0.5, v})
			}
			calls = append(calls, line("rate limit "+s.Group, limit, map[string]any{"lineStyle": map[string]any{"type": "dashed"}}))
		}
	}
	if len(calls) > 0 {
		o := base("Calls per second, by send time", "calls/s")
		o["series"] = withMarks(calls)
		out = append(out, chartSpec{ID: "chart-calls", Title: "Calls per second", Option: o})
	}

	// Each edge replica's share.
	if len(rep.Replicas) > 0 {
		var series []any
		for _, s := range rep.Replicas {
			var ok, ref [][2]float64
			for i, b := range s.Buckets {
				ok = append(ok, [2]float64{float64(i) + 0.5, float64(b.OK)})
				ref = append(ref, [2]float64{float64(i) + 0.5, float64(b.Refused)})
			}
			series = append(series,
				map[string]any{"name": "admitted by " + s.Group, "type": "bar", "stack": "admitted", "data": ok},
				map[string]any{"name": "refused by " + s.Group, "type": "bar", "stack": "refused", "data": ref})
		}
		o := base("Each edge replica: admitted and refused per second (stacked)", "calls/s")
		o["series"] = withMarks(series)
		out = append(out, chartSpec{ID: "chart-replicas", Title: "Per edge replica", Option: o})
	}

	if ov := rep.Overhead; ov != nil {
		names := []string{"p50", "p90", "p99", "p99.9"}
		ms := func(l LatencySummary) []float64 {
			return []float64{float64(l.P50) / 1000, float64(l.P90) / 1000, float64(l.P99) / 1000, float64(l.P999) / 1000}
		}
		o := base(ov.Call+": straight to the backend and through the edge (ms)", "ms")
		o["tooltip"] = map[string]any{"trigger": "axis"}
		o["xAxis"] = map[string]any{"type": "category", "data": names}
		o["series"] = []any{
			map[string]any{"name": "backend", "type": "bar", "data": ms(ov.Backend.Latency), "label": map[string]any{"show": true, "position": "top"}},
			map[string]any{"name": "edge", "type": "bar", "data": ms(ov.Edge.Latency), "label": map[string]any{"show": true, "position": "top"}},
		}
		out = append(out, chartSpec{ID: "chart-overhead", Title: "Latency percentiles, backend vs edge", Option: o})
	}
	return out
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"micros": micros,
	"pct": func(a, b int) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
	},
	"num": func(f float64) string {
		if math.Abs(f) >= 100 {
			return fmt.Sprintf("%.0f", f)
		}
		return fmt.Sprintf("%.2f", f)
	},
	"lower": strings.ToLower,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="loadtest, Apache ECharts {{.Version}}">
<title>loadtest {{.R.Scenario}} {{.R.RunID}}: {{.R.Verdict}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.4em; margin-bottom: .2em; }
.meta { color: #555; margin: 0 0 1em; }
.verdict { padding: .6em 1em; border-radius: 6px; font-size: 1.2em; font-weight: bold; }
.verdict-pass { background: #e3f4e8; color: #1d6b33; }
.verdict-fail { background: #fde4e4; color: #a11; }
.verdict-inconclusive { background: #fff1dc; color: #8a5300; }
.because { margin: .5em 0 1.5em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }
th, td { border-bottom: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
td.v-FAIL { color: #a11; font-weight: bold; } td.v-PASS { color: #1d6b33; } td.v-INCONCLUSIVE { color: #8a5300; font-weight: bold; }
.chart { width: 100%; height: 360px; margin: 1em 0 2em; }
h2 { font-size: 1.1em; margin-top: 1.5em; }
</style>
</head>
<body>
<h1>loadtest {{.R.Scenario}}, run {{.R.RunID}}</h1>
<p class="meta">{{.R.Protocol}} · edge {{range $i, $e := .R.Edges}}{{if $i}}, {{end}}{{$e}}{{end}}{{if .R.Backend}} · backend {{.R.Backend}}{{end}} · started {{.Started}} · {{.Duration}}{{if .R.Model}} · {{.R.Model}} model{{end}}{{if .R.Planned}} · planned {{.R.Planned}} calls ({{num .R.Rate}}/s), sent {{.R.Totals.Sent}} ({{num .R.Achieved}}/s){{end}}</p>
<div id="verdict" class="verdict verdict-{{lower .R.Verdict}}">VERDICT {{.R.Verdict}}</div>
{{if .R.Because}}<ul class="because" id="because">{{range .R.Because}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p>calls: sent {{.R.Totals.Sent}} · ok {{.R.Totals.OK}} · refused {{.R.Totals.Refused}} · aborted {{.R.Totals.Aborted}} · errors {{.R.Totals.Failed}} ({{pct .R.Totals.Failed .R.Totals.Sent}}) · unfinished {{.R.Totals.Unfinished}} · malformed refusals {{.R.Totals.Malformed}}</p>
{{if .R.Plans}}<h2>Plans</h2>
<table id="plans"><tr><th>plan</th><th>limit</th><th>subjects</th><th>sent</th><th>admitted</th><th>refused</th><th>errors</th><th>allowed ±tol</th><th>verdict</th><th>why</th></tr>
{{range .R.Plans}}<tr><td>{{.Plan.Name}}</td><td>{{.Plan.Limit}}</td><td>{{.Subjects}}</td><td>{{.Sent}}</td><td>{{.Admitted}}</td><td>{{.Refused}}</td><td>{{.Failed}}</td><td>{{.Allowed}} ±{{.Tolerance}}</td><td class="v-{{.Verdict}}">{{.Verdict}}</td><td>{{range .Why}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .R.Checks}}<h2>Checks</h2>
<table id="checks"><tr><th>check</th><th>expected</th><th>observed</th><th>verdict</th><th>problems</th></tr>
{{range .R.Checks}}<tr><td>{{.Name}}</td><td>{{.Expected}}</td><td>{{.Observed}}</td><td class="v-{{.Verdict}}">{{.Verdict}}</td><td>{{range .Problems}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .R.Thresholds}}<h2>Thresholds</h2>
<table id="thresholds"><tr><th>threshold</th><th>limit</th><th>observed</th><th>verdict</th></tr>
{{range .R.Thresholds}}<tr><td>{{.Name}}</td><td>{{.Expected}}</td><td>{{.Observed}}</td><td class="v-{{.Verdict}}">{{.Verdict}}</td></tr>
{{end}}</table>{{end}}
{{if .R.Edge}}<h2>What the edge did (its /metrics before and after the run)</h2>
<table id="edge"><tr><th>replica</th><th>admin</th><th>counters that rose</th></tr>
{{range .R.Edge}}<tr><td>{{.Edge}}</td><td>{{.Admin}}</td><td>{{if .Error}}not read: {{.Error}}{{else}}{{range .Said}}{{.}}<br>{{else}}closed no connection, held no call, answered nothing unavailable, no fail-open decision{{end}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .R.Latency}}{{if .R.Latency.Count}}<p>latency ({{.R.LatencyFrom}}): p50 {{micros .R.Latency.P50}} · p90 {{micros .R.Latency.P90}} · p99 {{micros .R.Latency.P99}} · p99.9 {{micros .R.Latency.P999}} · max {{micros .R.Latency.Max}}</p>{{end}}{{end}}
{{range .Charts}}<h2>{{.Title}}</h2>
<div class="chart" id="{{.ID}}"></div>
{{end}}
{{if .R.Malformed}}<h2>Malformed refusals</h2><ul>{{range .R.Malformed}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .R.Notes}}<h2>Notes</h2><ul>{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
<script>{{.Library}}</script>
<script>
for (const c of {{.Charts}}) {
  echarts.init(document.getElementById(c.id), null, {renderer: "svg"}).setOption(c.option);
}
</script>
</body>
</html>
`))

// writeHTML writes the report page.
func (rep *Report) writeHTML(w io.Writer) error {
	return reportPage.Execute(w, struct {
		R                 *Report
		Version           string
		Started, Duration string
		Charts            []chartSpec
		Library           template.JS
	}{
		R: rep, Version: echartsVersion, Started: rep.Started.Format("2006-01-02 15:04:05 MST"),
		Duration: fmt.Sprintf("%s (elapsed %.1fs)", time.Duration(rep.Duration), time.Duration(rep.Elapsed).Seconds()),
		Charts:   rep.charts(),
		// The library as shipped, trusted: it is part of this program.
		Library: template.JS(echartsJS),
	})
}
