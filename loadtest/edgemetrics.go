package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What a verdict names of what the edge did: the counters of its admin
// listener's /metrics (docs/operations.md, "Metrics") that say why calls
// failed or were refused otherwise than by a limit, read before and after
// the run. Their differences belong to the whole replica (other clients'
// calls included), which a shared stack must keep in mind.
var edgeCounters = []struct {
	family, label string
	// say words a difference of n (and the label's value).
	say func(n int64, value string) string
}{
	{"edge_connections_closed_total", "reason", func(n int64, v string) string {
		why := v
		switch v {
		case "per_address":
			why = "per_address: more open connections from one address than listen.max_connections_per_address"
		case "resets":
			why = "resets: HTTP/2 streams reset past listen.max_resets_per_connection"
		}
		return fmt.Sprintf("closed %d connections (%s)", n, why)
	}},
	{"edge_fail_open_decisions_total", "outcome", func(n int64, v string) string {
		return fmt.Sprintf("decided %d calls %s on its local share while Redis was unreachable (fail-open: each replica admits limits.local_share of each limit)", n, v)
	}},
	{"edge_early_calls_held_total", "", func(n int64, _ string) string {
		return fmt.Sprintf("held %d early calls until the retry time of an earlier refusal on their connection (listen.max_early_calls)", n)
	}},
	{"edge_unavailable_total", "reason", func(n int64, v string) string {
		if v == "overload" {
			return fmt.Sprintf("answered %d calls unavailable EDGE_OVERLOADED (overload: more calls in flight than listen.max_calls_in_flight)", n)
		}
		return fmt.Sprintf("answered %d calls unavailable (reason %s)", n, v)
	}},
	{"edge_redis_breaker_opens_total", "", func(n int64, _ string) string {
		return fmt.Sprintf("opened its Redis breaker %d times (Redis failed the limiter's calls)", n)
	}},
	{"edge_http2_errors_total", "type", func(n int64, v string) string {
		return fmt.Sprintf("saw %d HTTP/2 protocol errors of clients (%s)", n, v)
	}},
}

// EdgeActivity is what one edge replica's counters say it did during the
// run.
type EdgeActivity struct {
	Edge   string      `json:"edge"`
	Admin  string      `json:"admin"`
	Error  string      `json:"error,omitempty"` // the metrics could not be read
	Counts []EdgeCount `json:"counts,omitempty"`
	Said   []string    `json:"said,omitempty"` // Counts in words
	before edgeCounterValues
}

// EdgeCount is one counter's rise over the run.
type EdgeCount struct {
	Metric string `json:"metric"`
	Label  string `json:"label,omitempty"` // label=value
	Delta  int64  `json:"delta"`
}

// edgeCounterValues are the watched counters by series (family{label="value"}).
type edgeCounterValues map[string]float64

// maxMetricsBody bounds what a scrape reads: the edge's exposition is a few
// hundred kilobytes at most.
const maxMetricsBody = 16 << 20

// metricsTimeout bounds one scrape.
const metricsTimeout = 5 * time.Second

// scrapeEdge reads the watched counters at admin/metrics.
func scrapeEdge(ctx context.Context, hc *http.Client, admin string) (edgeCounterValues, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", admin, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(res.Body, maxMetricsBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", admin, err)
	}
	out := edgeCounterValues{}
	for _, c := range edgeCounters {
		f := families[c.family]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			value := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == c.label {
					value = l.GetValue()
				}
			}
			out[series(c.family, c.label, value)] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

func series(family, label, value string) string {
	if label == "" {
		return family
	}
	return fmt.Sprintf("%s{%s=%q}", family, label, value)
}

// watchEdges reads every edge's counters before the run; an edge whose
// metrics cannot be read is noted, not failed: the verdict is the calls'.
func (r *runner) watchEdges(ctx context.Context) []*EdgeActivity {
	var out []*EdgeActivity
	hc := &http.Client{Transport: r.tr.http1, Timeout: metricsTimeout}
	for i, admin := range r.o.Admins {
		a := &EdgeActivity{Edge: r.edges[i].Name, Admin: admin}
		v, err := scrapeEdge(ctx, hc, admin)
		if err != nil {
			a.Error = err.Error()
		}
		a.before = v
		out = append(out, a)
	}
	return out
}

// edgesAfter reads the counters again and puts what rose in words.
func (r *runner) edgesAfter(ctx context.Context, watched []*EdgeActivity) []EdgeActivity {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer cancel()
	hc := &http.Client{Transport: r.tr.http1, Timeout: metricsTimeout}
	out := make([]EdgeActivity, 0, len(watched))
	for _, a := range watched {
		if a.Error == "" {
			after, err := scrapeEdge(ctx, hc, a.Admin)
			if err != nil {
				a.Error = err.Error()
			} else {
				a.Counts, a.Said = edgeDeltas(a.before, after)
			}
		}
		out = append(out, *a)
	}
	return out
}

// edgeDeltas returns the counters that rose from before to after, and
// each in words.
func edgeDeltas(before, after edgeCounterValues) ([]EdgeCount, []string) {
	var counts []EdgeCount
	var said []string
	for _, c := range edgeCounters {
		for _, key := range slices.Sorted(maps.Keys(after)) {
			name, labels, _ := strings.Cut(key, "{")
			if name != c.family {
				continue
			}
			d := int64(after[key] - before[key])
			if d <= 0 {
				continue
			}
			value := ""
			if labels != "" {
				_, v, _ := strings.Cut(strings.TrimSuffix(labels, "}"), "=")
				value = strings.Trim(v, `"`)
			}
			ec := EdgeCount{Metric: c.family, Delta: d}
			if c.label != "" {
				ec.Label = c.label + "=" + value
			}
			counts = append(counts, ec)
			said = append(said, c.say(d, value))
		}
	}
	return counts, said
}

// edgeCauses are the edges' activities as a verdict's causes: one line per
// replica and counter, and a line per replica not read.
func edgeCauses(edges []EdgeActivity) []string {
	var out []string
	for _, a := range edges {
		for _, s := range a.Said {
			out = append(out, a.Edge+" "+s)
		}
		if a.Error != "" {
			out = append(out, fmt.Sprintf("%s: its metrics (%s) could not be read: %s", a.Edge, a.Admin, a.Error))
		}
	}
	return out
}
