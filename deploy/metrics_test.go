package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/prometheus/promql/parser"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// expr is one PromQL expression of the dashboard or the alert rules.
type expr struct {
	where string // e.g. `dashboard panel "Calls/s"`
	expr  string
}

// grafanaVar matches Grafana's template variables: $name, ${name} and
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?(__[a-z_]+|[A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// promQL turns a Grafana expression into PromQL: intervals become a
// duration, other variables a regular expression that matches anything
// (they only stand in label matchers).
func promQL(s string) string {
	return grafanaVar.ReplaceAllStringFunc(s, func(v string) string {
		name := grafanaVar.FindStringSubmatch(v)[1]
		switch name {
		case "__rate_interval", "__interval", "__range", "__range_s":
			return "5m"
		}
		return ".*"
	})
}

// labelValues matches Grafana's label_values(selector, label) query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// dashboardAndAlertExprs collects every expression of the dashboard (panel
// targets, annotations, template variables) and of the alert rules.
func dashboardAndAlertExprs(t *testing.T) []expr {
	t.Helper()
	var out []expr
	for _, r := range alertRules(t) {
		out = append(out, expr{where: "alert " + r.Alert + r.Record, expr: r.Expr})
	}
	data, err := os.ReadFile("grafana/dashboards/orgedge.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = fmt.Sprintf("dashboard panel %q", title)
			}
			if e, ok := v["expr"].(string); ok {
				out = append(out, expr{where: where, expr: promQL(e)})
			}
			for k, c := range v {
				if k != "templating" {
					walk(c, where)
				}
			}
		case []any:
			for _, c := range v {
				walk(c, where)
			}
		}
	}
	walk(dash, "dashboard")
	tmpl, _ := dash["templating"].(map[string]any)
	vars, _ := tmpl["list"].([]any)
	for _, v := range vars {
		v, _ := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		q := v["query"]
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		qs, _ := q.(string)
		if m := labelValues.FindStringSubmatch(qs); m != nil {
			qs = m[1]
		}
		out = append(out, expr{where: fmt.Sprintf("dashboard variable $%v", v["name"]), expr: promQL(qs)})
	}
	return out
}

var promParser = parser.NewParser(parser.Options{})

// metricNames parses a PromQL expression and returns the metric names its
// selectors name.
func metricNames(e string) ([]string, error) {
	uses, err := metricUses(e)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, u := range uses {
		names = append(names, u.metrics...)
	}
	return names, nil
}

// metricUse is one thing an expression needs from the metrics: a selector
// naming one metric and label names it matches on, or an aggregation
// grouping by label names that one of the metrics below it must carry.
type metricUse struct {
	metrics []string // one for a selector; those the aggregation reads otherwise
	labels  []string
	what    string // "matches on", "groups by"
}

func metricUses(e string) ([]metricUse, error) {
	ast, err := promParser.ParseExpr(e)
	if err != nil {
		return nil, err
	}
	var uses []metricUse
	named := 0
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			var labels []string
			for _, m := range n.LabelMatchers {
				switch m.Name {
				case "__name__":
					name = m.Value
				default:
					labels = append(labels, m.Name)
				}
			}
			if name != "" {
				named++
				uses = append(uses, metricUse{metrics: []string{name}, labels: labels, what: "matches on"})
			}
		case *parser.AggregateExpr:
			if n.Without || len(n.Grouping) == 0 {
				return nil
			}
			var below []string
			parser.Inspect(n.Expr, func(m parser.Node, _ []parser.Node) error {
				if vs, ok := m.(*parser.VectorSelector); ok && vs.Name != "" {
					below = append(below, vs.Name)
				}
				return nil
			})
			uses = append(uses, metricUse{metrics: below, labels: n.Grouping, what: "groups by"})
		}
		return nil
	})
	if named == 0 {
		return nil, errors.New("names no metric")
	}
	return uses, nil
}

func TestDashboardIsWellFormed(t *testing.T) {
	data, err := os.ReadFile("grafana/dashboards/orgedge.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Query      any    `json:"query"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
				Current struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			Targets []struct {
				Expr       string `json:"expr"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	var ds struct {
		Datasources []struct{ UID, Type string } `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yaml", &ds)
	promUID := ""
	for _, d := range ds.Datasources {
		if d.Type == "prometheus" {
			promUID = d.UID
		}
	}
	// The datasource and the jobs are variables, so that the dashboard
	// works on any Prometheus (kube-prometheus-stack, Grafana Cloud), with
	// whatever job names its scrape configuration gives; the defaults are
	// the Compose stack's.
	const dsVar = "${datasource}"
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		switch v.Name {
		case "datasource":
			if v.Type != "datasource" || v.Query != "prometheus" || v.Current.Value != promUID {
				t.Errorf("variable $datasource: type %q query %v default %v, want a prometheus datasource defaulting to %q", v.Type, v.Query, v.Current.Value, promUID)
			}
		case "job", "backend_job", "instance":
			if v.Datasource.UID != dsVar {
				t.Errorf("variable $%s uses datasource %q, want %q", v.Name, v.Datasource.UID, dsVar)
			}
		}
	}
	for _, want := range []string{"datasource", "job", "backend_job", "instance"} {
		if !vars[want] {
			t.Errorf("dashboard has no $%s variable", want)
		}
	}
	promUID = dsVar // every panel and query uses the variable
	ids := map[int]bool{}
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		titles[p.Title] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != promUID {
			t.Errorf("panel %q does not use the provisioned Prometheus datasource %q", p.Title, promUID)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != promUID {
				t.Errorf("panel %q: a query uses datasource %q", p.Title, tg.Datasource.UID)
			}
			if strings.Contains(tg.Expr, "edge_") && (!strings.Contains(tg.Expr, "$instance") || !strings.Contains(tg.Expr, "$job")) {
				t.Errorf("panel %q: edge query ignores $job or $instance: %s", p.Title, tg.Expr)
			}
			if strings.Contains(tg.Expr, "orgsvc_") && !strings.Contains(tg.Expr, "$backend_job") {
				t.Errorf("panel %q: backend query ignores $backend_job: %s", p.Title, tg.Expr)
			}
		}
	}
	// What the SRE reads on it (docs/operations.md walks through these).
	for _, want := range []string{
		"Calls by backend", "Failed calls by backend", "Backend p99 by address", "Ejections by backend", "Backend health",
		"Calls by service and method", "Calls by code (not ok)", "Edge latency (unary)", "Upstream latency (unary)",
		"Edge overhead (time in the edge)", "Refusals by plan and limit", "Quota refusals", "Idempotent replays",
		"Open streams by method", "Stream leases held", "Redis latency by operation", "Circuit breaker by replica",
		"Fail-open periods", "Calls/s by replica", "Backend calls by method", "Storage latency by operation (p99)",
	} {
		if !titles[want] {
			t.Errorf("dashboard lacks panel %q", want)
		}
	}
}

func TestDashboardAndAlertExpressionsParse(t *testing.T) {
	for _, e := range dashboardAndAlertExprs(t) {
		if _, err := metricNames(e.expr); err != nil {
			t.Errorf("%s: %v\n\t%s", e.where, err, e.expr)
		}
	}
}

// TestDashboardAndAlertsUseExportedMetrics runs a real edge in front of the
// real backend binary, sends the calls that make every metric appear (a
// keyed call and its replay, refusals for role, rate and quota, a stream),
// scrapes both, and checks that every metric the dashboard and the alerts
// name is exported: a renamed metric must not leave a blank panel or an
// alert that never fires.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		// It builds and starts the stack; -short may drop it on a
		// developer's machine, loudly, but never under CI.
		if testenv.InCI() {
			t.Log("-short under CI=true: running anyway, the dashboard must be checked against live metrics")
		} else {
			t.Skip("-short: the dashboard and alerts are NOT checked against live metrics (run without -short, as CI does)")
		}
	}
	issuer := testkit.StartIssuer(t)
	backend := startBackendBinary(t, issuer.URL())
	cfg := testkit.EdgeConfig(t, backend.url, issuer.URL())
	e := testkit.StartEdge(t, cfg)

	serveTraffic(t, e.URL, issuer.URL())

	exported := scrape(t, e.AdminURL+"/metrics")
	for name, labels := range scrape(t, backend.adminURL+"/metrics") {
		exported[name] = labels
	}
	// The redis group's alerts read redis_exporter's metrics, as compose
	// scrapes them: run the real exporter against the test's Redis.
	for name, labels := range scrape(t, startRedisExporter(t, cfg.Redis.Addr)+"/metrics") {
		exported[name] = labels
	}
	// Prometheus adds up per target, and job and instance to every series.
	exported["up"] = map[string]bool{}
	for _, labels := range exported {
		labels["job"], labels["instance"] = true, true
	}
	// Recording rules export what they record, with the labels their
	// expression sets or keeps by name.
	for _, r := range alertRules(t) {
		if r.Record != "" {
			exported[r.Record] = recordedLabels(t, r.Expr)
		}
	}

	problems := map[string][]string{}
	for _, ex := range dashboardAndAlertExprs(t) {
		uses, err := metricUses(ex.expr)
		if err != nil {
			continue // TestDashboardAndAlertExpressionsParse reports it
		}
		for _, u := range uses {
			if u.what == "matches on" {
				if _, ok := exported[u.metrics[0]]; !ok {
					problems[u.metrics[0]+" is not exported"] = append(problems[u.metrics[0]+" is not exported"], ex.where)
					continue
				}
			}
			for _, l := range u.labels {
				found := false
				for _, m := range u.metrics {
					found = found || exported[m][l]
				}
				if !found && len(u.metrics) > 0 {
					msg := fmt.Sprintf("%s label %q, which %s lack(s)", u.what, l, strings.Join(dedupe(u.metrics), ", "))
					problems[msg] = append(problems[msg], ex.where)
				}
			}
		}
	}
	msgs := make([]string, 0, len(problems))
	for m := range problems {
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		t.Errorf("%s; used by %s", m, strings.Join(dedupe(problems[m]), ", "))
	}
}

// recordedLabels returns the label names a recording rule's expression
// names as its output's: those label_replace sets and those its
// aggregations keep (by).
func recordedLabels(t *testing.T, e string) map[string]bool {
	t.Helper()
	ast, err := promParser.ParseExpr(e)
	if err != nil {
		t.Fatalf("recording rule %q: %v", e, err)
	}
	labels := map[string]bool{}
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.Call:
			if n.Func.Name == "label_replace" {
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					labels[dst.Val] = true
				}
			}
		case *parser.AggregateExpr:
			if !n.Without {
				for _, l := range n.Grouping {
					labels[l] = true
				}
			}
		}
		return nil
	})
	return labels
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// serveTraffic makes the edge count something in every metric: forwarded
// calls in several protocols, an Idempotency-Key and its replay, a role
// refusal, an operation-rate and a quota refusal, a stream and GetUsage.
func serveTraffic(t *testing.T, edgeURL, issuerURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := testkit.NewClients(edgeURL, testkit.ConnectJSON, testkit.Token(t, issuerURL, "svc-admin"))
	viewer := testkit.NewClients(edgeURL, testkit.GRPC, testkit.Token(t, issuerURL, "svc-viewer"))
	alice := testkit.NewClients(edgeURL, testkit.GRPC, testkit.Token(t, issuerURL, "alice"))

	// A keyed call, then its replay.
	create := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "metrics", BillingEmail: "ops@example.com"})
	create.Header().Set("Idempotency-Key", "deploy-metrics-1")
	org, err := admin.Org.CreateOrganization(ctx, create)
	if err != nil {
		t.Fatalf("CreateOrganization: %v", err)
	}
	if _, err := admin.Org.CreateOrganization(ctx, create); err != nil {
		t.Fatalf("CreateOrganization, replayed: %v", err)
	}
	prj, err := admin.Org.CreateProject(ctx, connect.NewRequest(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	if _, err := viewer.Org.GetOrganization(ctx, connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: org.Msg.Id})); err != nil {
		t.Fatalf("GetOrganization: %v", err)
	}
	// A role refusal.
	if _, err := viewer.Org.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "nope", BillingEmail: "a@b.example"})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("svc-viewer CreateOrganization: %v, want permission_denied", err)
	}

	// Environments: the free plan runs 2 at once, so the third is refused
	// for quota; one is watched, then deleted (quota released).
	var envs []string
	for i := range 3 {
		res, err := admin.Env.CreateEnvironment(ctx, connect.NewRequest(&svcv1.CreateEnvironmentRequest{
			Name: fmt.Sprintf("e%d", i), BlueprintId: "go-api", ProjectId: prj.Msg.Id,
		}))
		if i < 2 {
			if err != nil {
				t.Fatalf("CreateEnvironment %d: %v", i, err)
			}
			envs = append(envs, res.Msg.Environment.Id)
		} else if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("third CreateEnvironment on the free plan: %v, want resource_exhausted", err)
		}
	}
	streamCtx, stopStream := context.WithCancel(ctx)
	stream, err := viewer.Env.WatchEnvironment(streamCtx, connect.NewRequest(&svcv1.WatchEnvironmentRequest{EnvironmentId: envs[0]}))
	if err != nil {
		t.Fatalf("WatchEnvironment: %v", err)
	}
	if !stream.Receive() {
		t.Fatalf("WatchEnvironment: no first message: %v", stream.Err())
	}
	stopStream()
	_ = stream.Close()
	if _, err := admin.Env.DeleteEnvironment(ctx, connect.NewRequest(&svcv1.DeleteEnvironmentRequest{EnvironmentId: envs[1]})); err != nil {
		t.Fatalf("DeleteEnvironment: %v", err)
	}

	// An operation-rate refusal: SearchCatalog allows 30 a minute.
	refused := false
	for range 31 {
		_, err := alice.Blueprint.SearchCatalog(ctx, connect.NewRequest(&svcv1.SearchCatalogRequest{}))
		if connect.CodeOf(err) == connect.CodeResourceExhausted {
			refused = true
			break
		}
		if err != nil {
			t.Fatalf("SearchCatalog: %v", err)
		}
	}
	if !refused {
		t.Fatal("SearchCatalog: 31 calls in a minute were not refused")
	}
	if _, err := alice.Usage.GetUsage(ctx, connect.NewRequest(&svcv1.GetUsageRequest{})); err != nil {
		t.Fatalf("GetUsage: %v", err)
	}
}

// scrape returns, by name, the label names of every sample /metrics
// exports: counters and gauges by name, histograms and summaries by their
// _bucket, _sum and _count (and their base name, for native histograms).
func scrape(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, res.Status)
	}
	metrics := map[string]map[string]bool{}
	add := func(name string, labels []string) {
		if metrics[name] == nil {
			metrics[name] = map[string]bool{}
		}
		for _, l := range labels {
			metrics[name][l] = true
		}
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if parts := strings.Fields(f); len(parts) == 2 && (parts[1] == "histogram" || parts[1] == "summary") {
				add(parts[0], nil)
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, err := parseSample(line)
		if err != nil {
			t.Fatalf("scrape %s: %v: %q", url, err, line)
		}
		add(name, labels)
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && metrics[base] != nil {
				add(base, slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "le" }))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(metrics) == 0 {
		t.Fatalf("scrape %s: no samples", url)
	}
	return metrics
}

// parseSample reads the name and label names of one line of Prometheus'
// text format: name{label="value",...} value [timestamp].
func parseSample(line string) (name string, labels []string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, errors.New("no metric name")
	}
	name, rest := line[:i], line[i:]
	if rest[0] != '{' {
		return name, nil, nil
	}
	rest = rest[1:]
	for {
		rest = strings.TrimLeft(rest, ", ")
		if strings.HasPrefix(rest, "}") {
			return name, labels, nil
		}
		eq := strings.Index(rest, "=\"")
		if eq <= 0 {
			return "", nil, errors.New("malformed labels")
		}
		labels = append(labels, rest[:eq])
		rest = rest[eq+2:]
		// The value runs to the first unescaped quote.
		for j := 0; ; j++ {
			if j >= len(rest) {
				return "", nil, errors.New("unterminated label value")
			}
			if rest[j] == '\\' {
				j++
				continue
			}
			if rest[j] == '"' {
				rest = rest[j+1:]
				break
			}
		}
	}
}

// runningBackend is the orgsvc binary, started for one test.
type runningBackend struct {
	url      string // the API
	adminURL string // /metrics, /healthz, /readyz
}

// buildBinary builds a command of this module (e.g. "cmd/orgsvc") into a
// temporary directory, as the Dockerfiles do.
func buildBinary(t *testing.T, cmd string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(cmd))
	build := exec.Command(goTool(), "build", "-trimpath", "-o", bin, "github.com/orgedge/edge/"+cmd)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", cmd, err, out)
	}
	return bin
}

// startRedisExporter runs redis_exporter (Debian's prometheus-redis-exporter)
// against the Redis at addr until the test ends, and returns its URL.
func startRedisExporter(t *testing.T, addr string) string {
	t.Helper()
	bin := tool(t, "prometheus-redis-exporter", "redis_exporter")
	listen := freeAddr(t)
	return startDaemon(t, "http://"+listen, "/metrics", bin, "-redis.addr", "redis://"+addr, "-web.listen-address", listen)
}

// startDaemon runs bin with args until the test ends, waits until
// url+readyPath answers 200, and returns url.
func startDaemon(t *testing.T, url, readyPath, bin string, args ...string) string {
	t.Helper()
	var logs lockedBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for httpStatus(url+readyPath) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering %s after 20s:\n%s", filepath.Base(bin), readyPath, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url
}

// startBackendBinary runs the orgsvc binary, on PostgreSQL as in
// compose.yaml, with the admin listener the deployment scrapes
// (-admin-addr), until the test ends.
func startBackendBinary(t *testing.T, issuerURL string) *runningBackend {
	t.Helper()
	dsn := testenv.PostgresDatabase(t)
	bin := buildBinary(t, "cmd/orgsvc")
	addr, adminAddr := freeAddr(t), freeAddr(t)
	rb := &runningBackend{url: "http://" + addr, adminURL: "http://" + adminAddr}
	var logs lockedBuffer
	cmd := exec.Command(bin, "-addr", addr, "-admin-addr", adminAddr, "-database", dsn, "-issuer", issuerURL, "-audience", "api", "-log-format", "text")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), "OTEL_SDK_DISABLED=true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for httpStatus(rb.adminURL+"/readyz") != http.StatusOK {
		select {
		case err := <-exited:
			t.Fatalf("orgsvc exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("orgsvc not ready after 30s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return rb
}

// httpStatus GETs url and returns the status code, 0 if there was no answer.
func httpStatus(url string) int {
	res, err := http.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}

// goTool returns the go command: go test puts its own toolchain's first on PATH.
func goTool() string { return "go" }

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
