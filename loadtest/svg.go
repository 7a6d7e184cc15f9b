package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// Chart geometry.
const (
	chartWidth  = 960
	panelHeight = 230
	marginLeft  = 64
	marginRight = 150 // the legend
	marginTop   = 34
	marginBot   = 36
	headerH     = 48
)

// Series colours and names as the chart and its tests know them.
var seriesStyle = []struct{ name, colour, dash string }{
	{"admitted", "#2a9d4b", ""},
	{"refused", "#d62728", ""},
	{"aborted", "#ff9f1c", ""},
	{"errors", "#7f7f7f", ""},
	{"limit", "#1f5fbf", "6 4"},
}

// chart draws the report: per group (a plan, a target, the calls of a
// scenario) the admitted, refused and failed calls per second over time,
// with the plan's limit line where there is one, on a log scale so that a
// burst and the steady rate both show; and, for overhead, the latency
// percentiles of both targets side by side. Hand-written SVG 1.1.
func chart(rep *Report) []byte {
	panels := len(rep.Timeline)
	for _, s := range rep.Timeline {
		if s.Allowed != nil {
			panels++
		}
	}
	height := headerH + panels*panelHeight
	if rep.Overhead != nil {
		height += panelHeight
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">
<rect width="100%%" height="100%%" fill="white"/>
`, chartWidth, height, chartWidth, height)
	title := fmt.Sprintf("loadtest %s, run %s, %s, %s: %s", rep.Scenario, rep.RunID, rep.Protocol, rep.Started.Format("2006-01-02 15:04:05"), rep.Verdict)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginLeft, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">calls by send time: per second (log scale) and, for plans, in all against what the plan allows</text>`+"\n", marginLeft)
	y := headerH
	for _, s := range rep.Timeline {
		title, total := s.Group+": calls per second", s.Group+": calls in all"
		for _, p := range rep.Plans {
			if p.Plan.Name == s.Group {
				title = fmt.Sprintf("plan %s (%s) × %d subjects, per second: %s", p.Plan.Name, p.Plan.Limit(), p.Subjects, p.Verdict)
				total = fmt.Sprintf("plan %s in all: admitted %d of %d allowed (±%d), refused %d", p.Plan.Name, p.Admitted, p.Allowed, p.Tolerance, p.Refused)
			}
		}
		timelinePanel(&b, s, title, y)
		y += panelHeight
		if s.Allowed != nil {
			cumulativePanel(&b, s, total, y)
			y += panelHeight
		}
	}
	if rep.Overhead != nil {
		latencyPanel(&b, rep.Overhead, y)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func esc(s string) string { return html.EscapeString(s) }

// logScale maps v ≥ 0 onto [0, 1] against top.
func logScale(v, top float64) float64 {
	if top <= 0 {
		return 0
	}
	return math.Log10(1+v) / math.Log10(1+top)
}

func timelinePanel(b *bytes.Buffer, s Series, title string, y0 int) {
	x0, x1 := marginLeft, chartWidth-marginRight
	top, bottom := y0+marginTop, y0+panelHeight-marginBot
	n := len(s.Buckets)
	values := map[string][]float64{"admitted": nil, "refused": nil, "aborted": nil, "errors": nil}
	peak := 1.0
	anyErrors, anyAborted := false, false
	for _, bk := range s.Buckets {
		values["admitted"] = append(values["admitted"], float64(bk.OK))
		values["refused"] = append(values["refused"], float64(bk.Refused))
		values["aborted"] = append(values["aborted"], float64(bk.Aborted))
		values["errors"] = append(values["errors"], float64(bk.Failed))
		peak = max(peak, float64(bk.OK), float64(bk.Refused), float64(bk.Aborted), float64(bk.Failed))
		anyErrors = anyErrors || bk.Failed > 0
		anyAborted = anyAborted || bk.Aborted > 0
	}
	if len(s.Limit) > 0 {
		values["limit"] = s.Limit
		for _, v := range s.Limit {
			peak = max(peak, v)
		}
	}
	// The top of the scale is the next power of ten.
	topV := math.Pow(10, math.Ceil(math.Log10(peak*1.2)))
	fmt.Fprintf(b, `<g class="panel" data-group="%s">`+"\n", esc(s.Group))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0+marginTop-10, esc(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", x0, top, x1-x0, bottom-top)
	yOf := func(v float64) float64 { return float64(bottom) - logScale(v, topV)*float64(bottom-top) }
	for tick := 1.0; tick <= topV; tick *= 10 {
		y := yOf(tick)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%g/s</text>`+"\n", x0-6, y+4, tick)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#555">0</text>`+"\n", x0-6, bottom+4)
	if n == 0 {
		n = 1
	}
	xOf := func(sec int) float64 { return float64(x0) + float64(sec)*float64(x1-x0)/float64(n) }
	step := max(1, n/10)
	for sec := 0; sec <= n; sec += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%ds</text>`+"\n", xOf(sec), bottom+16, sec)
	}
	legendY := top + 6
	for _, st := range seriesStyle {
		vs, ok := values[st.name]
		if !ok || (st.name == "errors" && !anyErrors) || (st.name == "aborted" && !anyAborted) {
			continue
		}
		var pts []string
		for i, v := range vs {
			y := yOf(v)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", xOf(i), y, xOf(i+1), y))
		}
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		fmt.Fprintf(b, `<polyline class="series" data-series="%s" data-group="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n",
			st.name, esc(s.Group), st.colour, dash, strings.Join(pts, " "))
		label := st.name + "/s"
		switch {
		case st.name == "limit":
			label = "plan rate/s"
		case st.name == "admitted" && s.Limit == nil:
			label = "ok/s" // no limit to be admitted under
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			x1+12, legendY, x1+36, legendY, st.colour, dash, x1+42, legendY+4, esc(label))
		legendY += 18
	}
	b.WriteString("</g>\n")
}

// cumulativePanel draws the admitted and refused calls in all since the
// start against the plan's envelope, subjects × (burst + rate × t), on a
// linear scale: admitted must follow the envelope once bursts are spent and
// never rise above it.
func cumulativePanel(b *bytes.Buffer, s Series, title string, y0 int) {
	x0, x1 := marginLeft, chartWidth-marginRight
	top, bottom := y0+marginTop, y0+panelHeight-marginBot
	n := max(len(s.Buckets), len(s.Allowed), 1)
	var admitted, refused []float64
	okSum, refSum := 0, 0
	for _, bk := range s.Buckets {
		okSum += bk.OK
		refSum += bk.Refused
		admitted = append(admitted, float64(okSum))
		refused = append(refused, float64(refSum))
	}
	start := 0.0
	if len(s.Allowed) > 0 && len(s.Limit) > 0 {
		start = s.Allowed[0] - s.Limit[0]
	}
	peak := 1.0
	for _, v := range slices.Concat(admitted, refused, s.Allowed) {
		peak = max(peak, v)
	}
	peak *= 1.05
	xOf := func(sec int) float64 { return float64(x0) + float64(sec)*float64(x1-x0)/float64(n) }
	yOf := func(v float64) float64 { return float64(bottom) - v/peak*float64(bottom-top) }
	fmt.Fprintf(b, `<g class="panel" data-group="%s" data-kind="cumulative">`+"\n", esc(s.Group))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0+marginTop-10, esc(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", x0, top, x1-x0, bottom-top)
	for i := 0; i <= 4; i++ {
		v := peak / 1.05 * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f</text>`+"\n",
			x0, yOf(v), x1, yOf(v), x0-6, yOf(v)+4, v)
	}
	step := max(1, n/10)
	for sec := 0; sec <= n; sec += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%ds</text>`+"\n", xOf(sec), bottom+16, sec)
	}
	legendY := top + 6
	for _, line := range []struct {
		name, label, colour, dash string
		from                      float64
		values                    []float64
	}{
		{"admitted-cumulative", "admitted", "#2a9d4b", "", 0, admitted},
		{"refused-cumulative", "refused", "#d62728", "", 0, refused},
		{"allowed-cumulative", "plan allows", "#1f5fbf", "6 4", start, s.Allowed},
	} {
		if line.values == nil {
			continue
		}
		pts := []string{fmt.Sprintf("%.1f,%.1f", xOf(0), yOf(line.from))}
		for i, v := range line.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(i+1), yOf(v)))
		}
		dash := ""
		if line.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, line.dash)
		}
		fmt.Fprintf(b, `<polyline class="series" data-series="%s" data-group="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n",
			line.name, esc(s.Group), line.colour, dash, strings.Join(pts, " "))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			x1+12, legendY, x1+36, legendY, line.colour, dash, x1+42, legendY+4, esc(line.label))
		legendY += 18
	}
	b.WriteString("</g>\n")
}

func latencyPanel(b *bytes.Buffer, o *OverheadResult, y0 int) {
	x0, x1 := marginLeft, chartWidth-marginRight
	top, bottom := y0+marginTop, y0+panelHeight-marginBot
	names := []string{"p50", "p90", "p99", "p99.9"}
	be := []int64{o.Backend.Latency.P50, o.Backend.Latency.P90, o.Backend.Latency.P99, o.Backend.Latency.P999}
	ed := []int64{o.Edge.Latency.P50, o.Edge.Latency.P90, o.Edge.Latency.P99, o.Edge.Latency.P999}
	peak := int64(1)
	for i := range names {
		peak = max(peak, be[i], ed[i])
	}
	fmt.Fprintf(b, `<g class="panel" data-group="latency">`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s latency, backend straight vs through the edge (HDR percentiles)</text>`+"\n", x0, y0+marginTop-10, esc(o.Call))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", x0, top, x1-x0, bottom-top)
	groupW := float64(x1-x0) / float64(len(names))
	barW := groupW / 3
	for i, name := range names {
		gx := float64(x0) + float64(i)*groupW + barW/2
		for j, v := range []int64{be[i], ed[i]} {
			h := float64(v) / float64(peak) * float64(bottom-top-14)
			colour, series := "#9aa7b8", "backend"
			if j == 1 {
				colour, series = "#1f5fbf", "edge"
			}
			x := gx + float64(j)*barW
			fmt.Fprintf(b, `<rect class="bar" data-series="%s" data-percentile="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				series, name, x, float64(bottom)-h, barW-4, h, colour)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x+barW/2-2, float64(bottom)-h-3, esc(micros(v)))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", gx+barW, bottom+16, name)
	}
	legendY := top + 6
	for _, l := range []struct{ name, colour string }{{"backend", "#9aa7b8"}, {"edge", "#1f5fbf"}} {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="24" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x1+12, legendY-5, l.colour, x1+42, legendY+4, l.name)
		legendY += 18
	}
	b.WriteString("</g>\n")
}
