package deploy_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v3"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// dashboardPanels reads the dashboard's panels: title, and each query.
func dashboardPanels(t *testing.T) []struct {
	Title   string
	Targets []struct{ Expr string }
} {
	t.Helper()
	data, err := os.ReadFile("grafana/dashboards/orgedge.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	return dash.Panels
}

// The latency panels show forwarded calls, as docs/operations.md says:
// refusals answer in microseconds and would hide a slow backend or edge.
func TestDashboardLatencyOfCallsIsOfForwardedCalls(t *testing.T) {
	n := 0
	for _, p := range dashboardPanels(t) {
		for _, tg := range p.Targets {
			ast, err := promParser.ParseExpr(promQL(tg.Expr))
			if err != nil {
				continue // TestDashboardAndAlertExpressionsParse reports it
			}
			parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok || !strings.HasPrefix(vs.Name, "edge_request_duration_seconds") {
					return nil
				}
				n++
				forwarded := false
				for _, m := range vs.LabelMatchers {
					forwarded = forwarded || m.Name == "outcome" && m.Type == labels.MatchEqual && m.Value == "forwarded"
				}
				if !forwarded {
					t.Errorf("panel %q: %s counts every outcome, want outcome=\"forwarded\"", p.Title, vs)
				}
				return nil
			})
		}
	}
	if n == 0 {
		t.Error("no panel reads edge_request_duration_seconds")
	}
}

// The panels an SRE needs while a reload, a dependency or Redis fails, and
// the metrics they read.
func TestDashboardShowsReloadsUnavailableCausesAndFailOpenDecisions(t *testing.T) {
	want := map[string]string{
		"Configuration reloads":  "edge_config_reloads_total",
		"Configuration in force": "edge_config_last_reload_successful",
		"Unavailable by cause":   "edge_unavailable_total",
		"Fail-open decisions":    "edge_fail_open_decisions_total",
	}
	for _, p := range dashboardPanels(t) {
		metric, ok := want[p.Title]
		if !ok {
			continue
		}
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, metric) {
				delete(want, p.Title)
			}
		}
	}
	for title, metric := range want {
		t.Errorf("dashboard lacks panel %q reading %s", title, metric)
	}
}

// TestDashboardShowsAValueOnAHealthySystem runs the real edge and backend,
// sends calls that all succeed, scrapes both twice as Prometheus would, and
// evaluates every panel's queries on those samples (promtool): each must
// show a value, 0 where nothing went wrong, never "No data".
func TestDashboardShowsAValueOnAHealthySystem(t *testing.T) {
	t.Parallel()
	if testing.Short() && !testenv.InCI() {
		t.Skip("-short: the dashboard is NOT checked against live metrics (run without -short, as CI does)")
	}
	bin := promtool(t)
	issuer := testkit.StartIssuer(t)
	backend := startBackendBinary(t, issuer.URL())
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, backend.url, issuer.URL()))

	targets := []struct{ url, job, instance string }{
		{e.AdminURL + "/metrics", "edge", "edge-1:9090"},
		{backend.adminURL + "/metrics", "orgsvc", "orgsvc:9092"},
	}
	series := map[string][2]float64{}
	for i := range 2 {
		healthyTraffic(t, e.URL, issuer.URL(), i)
		for _, tg := range targets {
			for s, v := range scrapeSamples(t, tg.url, tg.job, tg.instance) {
				got, ok := series[s]
				if !ok {
					got = [2]float64{math.NaN(), math.NaN()}
				}
				got[i] = v
				series[s] = got
			}
			s := `up{job="` + tg.job + `",instance="` + tg.instance + `"}`
			series[s] = [2]float64{1, 1}
		}
	}

	type sample struct {
		Labels string  `yaml:"labels"`
		Value  float64 `yaml:"value"`
	}
	type exprTest struct {
		Expr       string   `yaml:"expr"`
		EvalTime   string   `yaml:"eval_time"`
		ExpSamples []sample `yaml:"exp_samples"`
	}
	type inputSeries struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	var test struct {
		Interval    string        `yaml:"interval"`
		InputSeries []inputSeries `yaml:"input_series"`
		ExprTests   []exprTest    `yaml:"promql_expr_test"`
	}
	test.Interval = "1m"
	names := make([]string, 0, len(series))
	for s := range series {
		names = append(names, s)
	}
	sort.Strings(names)
	value := func(v float64) string {
		if math.IsNaN(v) {
			return "_"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, s := range names {
		v := series[s]
		test.InputSeries = append(test.InputSeries, inputSeries{Series: s, Values: value(v[0]) + " " + value(v[1])})
	}
	// Each query, evaluated after the second scrape: clamp_max(count(q), 1)
	// is 1 if it shows anything, and nothing where the panel says "No data".
	for _, p := range dashboardPanels(t) {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			test.ExprTests = append(test.ExprTests, exprTest{
				Expr:       "clamp_max(count(" + promQL(tg.Expr) + "), 1)",
				EvalTime:   "1m",
				ExpSamples: []sample{{Labels: "{}", Value: 1}},
			})
		}
	}
	file := struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []any    `yaml:"tests"`
	}{RuleFiles: []string{}, Tests: []any{test}}
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "healthy_test.yml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "test", "rules", "healthy_test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("panel queries that show No data on a healthy system (got:[] below): %v\n%s", err, emptyQueries(string(out)))
	}
}

// emptyQueries picks the queries promtool found empty out of its report.
func emptyQueries(out string) string {
	var b strings.Builder
	for _, m := range regexp.MustCompile(`expr: ("(?:[^"\\]|\\.)*"), time: \S+,\s+exp: [^\n]*\n\s+got: nil`).FindAllStringSubmatch(out, -1) {
		q, err := strconv.Unquote(m[1])
		if err != nil {
			q = m[1]
		}
		q = strings.TrimSuffix(strings.TrimPrefix(q, "clamp_max(count("), "), 1)")
		b.WriteString("  " + q + "\n")
	}
	if b.Len() == 0 {
		return out
	}
	return b.String()
}

// healthyTraffic makes calls that all succeed, in two protocols.
func healthyTraffic(t *testing.T, edgeURL, issuerURL string, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := testkit.NewClients(edgeURL, testkit.ConnectJSON, testkit.Token(t, issuerURL, "svc-admin"))
	viewer := testkit.NewClients(edgeURL, testkit.GRPC, testkit.Token(t, issuerURL, "svc-viewer"))
	org, err := admin.Org.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "healthy-" + strconv.Itoa(round), BillingEmail: "ops@example.com"}))
	if err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	for range 3 {
		if _, err := viewer.Org.GetOrganization(ctx, connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: org.Msg.Id})); err != nil {
			t.Fatalf("GetOrganization: %v", err)
		}
	}
}

// scrapeSamples returns every sample of a /metrics, in promtool's series
// notation, with the job and instance labels Prometheus would add.
func scrapeSamples(t *testing.T, url, job, instance string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	text := expfmt.NewTextParser(model.UTF8Validation)
	families, err := text.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			ls := []string{`job=` + strconv.Quote(job), `instance=` + strconv.Quote(instance)}
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			add := func(name string, v float64, extra ...string) {
				out[name+"{"+strings.Join(append(append([]string{}, ls...), extra...), ",")+"}"] = v
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", float64(b.GetCumulativeCount()), `le=`+strconv.Quote(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))
				}
				add(name+"_bucket", float64(h.GetSampleCount()), `le="+Inf"`)
				add(name+"_sum", h.GetSampleSum())
				add(name+"_count", float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				add(name+"_sum", s.GetSampleSum())
				add(name+"_count", float64(s.GetSampleCount()))
			}
		}
	}
	return out
}
