package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/orgedge/edge/internal/testenv"
)

// tool finds a program the deployment tests run; under CI a missing one
// fails the test (scripts/test installs it).
func tool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatalf("none of %v is installed (scripts/test installs it)", names)
	}
	t.Skipf("none of %v is installed", names)
	return ""
}

func TestAlertmanagerConfigIsValidAndInhibitsOnlyKnownAlerts(t *testing.T) {
	amtool := tool(t, "amtool")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, amtool, "check-config", "alertmanager/alertmanager.yml").CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	var am struct {
		Inhibit []struct {
			Source []string `yaml:"source_matchers"`
			Target []string `yaml:"target_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	readYAML(t, "alertmanager/alertmanager.yml", &am)
	known := map[string]bool{}
	for _, r := range alertRules(t) {
		known[r.Alert] = true
	}
	name := regexp.MustCompile(`^alertname=~?"([^"]+)"$`)
	pairs := map[string]bool{}
	for _, r := range am.Inhibit {
		var sources, targets []string
		for _, m := range r.Source {
			if g := name.FindStringSubmatch(m); g != nil {
				sources = append(sources, strings.Split(g[1], "|")...)
			}
		}
		for _, m := range r.Target {
			if g := name.FindStringSubmatch(m); g != nil {
				targets = append(targets, strings.Split(g[1], "|")...)
			}
		}
		for _, a := range append(sources, targets...) {
			if !known[a] {
				t.Errorf("inhibit rule names %s, which alerts.yml does not define", a)
			}
		}
		for _, s := range sources {
			for _, tg := range targets {
				pairs[s+">"+tg] = true
			}
		}
	}
	// One page per cause: Redis out of reach pages once, for the breaker.
	if !pairs["EdgeRedisBreakerOpen>EdgeFailOpenActive"] {
		t.Error("EdgeRedisBreakerOpen does not inhibit EdgeFailOpenActive")
	}
}

// slug is the anchor GitHub gives a Markdown heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestRunbookURLsPointAtSectionsOfTheOperationsDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.Lines(string(doc)) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchors[slug(strings.TrimLeft(h, "#"))] = true
		}
	}
	const base = "https://github.com/orgedge/edge/blob/main/docs/operations.md#"
	n := 0
	for _, r := range alertRules(t) {
		u, ok := r.Annotations["runbook_url"]
		if !ok {
			continue
		}
		n++
		anchor, ok := strings.CutPrefix(u, base)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %s is not a section of docs/operations.md", r.Alert, u)
		}
	}
	for _, want := range []string{"EdgeAvailabilityBudgetBurnFast", "EdgeLatencyBudgetBurnFast"} {
		found := false
		for _, r := range alertRules(t) {
			found = found || r.Alert == want && r.Annotations["runbook_url"] != ""
		}
		if !found {
			t.Errorf("%s has no runbook_url", want)
		}
	}
	if n == 0 {
		t.Error("no alert has a runbook_url")
	}
}

// renderAlerts runs deploy/prometheus/render-alerts.sh on file with the
// job names given.
func renderAlerts(t *testing.T, file, edgeJob, backendJob string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "prometheus/render-alerts.sh", file)
	cmd.Env = append(os.Environ(), "EDGE_JOB="+edgeJob, "BACKEND_JOB="+backendJob)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// TestAlertRulesTakeTheJobNamesAsAParameter: the rules select the edge's
// and the backend's targets by job only through the two names
// render-alerts.sh replaces; Compose scrapes under the defaults; and the
// rules rendered for other names pass every rule test with the targets
// scraped under those names (BackendDown quiet while the backend is up).
func TestAlertRulesTakeTheJobNamesAsAParameter(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	src, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`job\s*(=~|!=|!~|=)\s*"[^"]*"`).FindAllString(string(src), -1) {
		if m != `job="edge"` && m != `job="orgsvc"` {
			t.Errorf("alerts.yml selects %s: only job=\"edge\" and job=\"orgsvc\" are parameters (render-alerts.sh)", m)
		}
	}
	if out, err := renderAlerts(t, "prometheus/alerts.yml", "edge", "orgsvc"); err != nil || !bytes.Equal(out, src) {
		t.Errorf("render-alerts.sh with the default names changes alerts.yml (%v)", err)
	}
	if _, err := renderAlerts(t, "prometheus/alerts.yml", `edge"} or vector(1) #`, "orgsvc"); err == nil {
		t.Error("render-alerts.sh accepts a job name that is not a name")
	}

	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "prometheus/prometheus.yml", &prom)
	jobs := map[string]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				jobs[strings.Split(target, ":")[0]] = sc.JobName
			}
		}
	}
	if jobs["edge-1"] != "edge" || jobs["edge-2"] != "edge" || jobs["orgsvc"] != "orgsvc" {
		t.Errorf("Compose's Prometheus scrapes %v: want the edges under job edge and the backend under orgsvc, the rules' defaults", jobs)
	}

	// Other names: the rules and their tests, rendered alike.
	const edgeJob, backendJob = "orgedge-edge", "orgedge/orgsvc"
	dir := t.TempDir()
	rules, err := renderAlerts(t, "prometheus/alerts.yml", edgeJob, backendJob)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rules, []byte(`job="edge"`)) || bytes.Contains(rules, []byte(`job="orgsvc"`)) {
		t.Error("render-alerts.sh left a default job name in the rules")
	}
	tests, err := renderAlerts(t, "prometheus/alerts_test.yml", edgeJob, backendJob)
	if err != nil {
		t.Fatal(err)
	}
	// The expected labels and texts of the tests name the jobs too.
	tests = []byte(strings.NewReplacer("job: edge\n", "job: "+edgeJob+"\n", "job: orgsvc\n", "job: "+backendJob+"\n",
		"under job edge", "under job "+edgeJob, "under job orgsvc", "under job "+backendJob).Replace(string(tests)))
	for name, data := range map[string][]byte{"alerts.yml": rules, "alerts_test.yml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "test", "rules", "alerts_test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the rule tests with jobs %s and %s: %v\n%s", edgeJob, backendJob, err, out)
	}
}

func TestKubernetesMonitoringMatchesComposeRulesAndScrapesTheEdge(t *testing.T) {
	var rules struct {
		Metadata struct {
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Spec struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
	}
	readYAML(t, "k8s/monitoring/prometheusrule.yaml", &rules)
	edgeJob, backendJob := rules.Metadata.Annotations["orgedge.example/edge-job"], rules.Metadata.Annotations["orgedge.example/backend-job"]
	rendered, err := renderAlerts(t, "prometheus/alerts.yml", edgeJob, backendJob)
	if err != nil {
		t.Fatalf("the PrometheusRule's job names %q and %q: %v", edgeJob, backendJob, err)
	}
	var compose struct {
		Groups any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rendered, &compose); err != nil {
		t.Fatal(err)
	}
	if rules.Spec.Groups == nil || !reflect.DeepEqual(rules.Spec.Groups, compose.Groups) {
		t.Error("k8s/monitoring/prometheusrule.yaml's groups differ from prometheus/alerts.yml rendered with its job names: run deploy/k8s/monitoring/regenerate.sh")
	}
	var sm struct {
		Spec struct {
			JobLabel string `yaml:"jobLabel"`
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []struct {
				Port string `yaml:"port"`
				Path string `yaml:"path"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
	readYAML(t, "k8s/monitoring/servicemonitor.yaml", &sm)
	type service struct {
		Metadata struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Ports []struct {
				Name string `yaml:"name"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	var svcs []service
	data, err := os.ReadFile("k8s/edge-service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var one service
		if err := yaml.Unmarshal([]byte(doc), &one); err == nil && one.Metadata.Name != "" {
			svcs = append(svcs, one)
		}
	}
	selected := 0
	for _, svc := range svcs {
		match := len(sm.Spec.Selector.MatchLabels) > 0
		for k, v := range sm.Spec.Selector.MatchLabels {
			match = match && svc.Metadata.Labels[k] == v
		}
		if !match {
			continue
		}
		selected++
		if job := svc.Metadata.Labels[sm.Spec.JobLabel]; job != edgeJob {
			t.Errorf("ServiceMonitor gives Service %s the job %q, the PrometheusRule selects %q", svc.Metadata.Name, job, edgeJob)
		}
		for _, ep := range sm.Spec.Endpoints {
			ok := false
			for _, p := range svc.Spec.Ports {
				ok = ok || p.Name == ep.Port
			}
			if !ok || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %+v: no such port on Service %s, or not /metrics", ep, svc.Metadata.Name)
			}
		}
	}
	if selected != 1 {
		t.Errorf("the ServiceMonitor selects %d Services, want 1 (edge-admin)", selected)
	}
}

// TestAlertmanagerRoutesPagesAndTickets asks amtool where each severity
// goes: critical alerts page, warnings (one replica down) make tickets.
func TestAlertmanagerRoutesPagesAndTickets(t *testing.T) {
	amtool := tool(t, "amtool")
	for labels, want := range map[string]string{
		"alertname=BackendDown severity=critical cause=backend":           "pager",
		"alertname=BackendReplicaDown severity=warning cause=backend":     "tickets",
		"alertname=EdgeReplicaDown severity=warning instance=edge-2:9090": "tickets",
		"alertname=EdgeTooFewReplicas severity=critical job=edge":         "pager",
		// A backend out of rotation while others serve is a ticket; none
		// left in an edge's rotation pages.
		"alertname=EdgeBackendOutOfRotation severity=warning cause=backend backend=10.0.0.3:8082": "tickets",
		"alertname=EdgeNoBackendInRotation severity=critical cause=backend instance=edge-1:9090":  "pager",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append([]string{"config", "routes", "test", "--config.file=alertmanager/alertmanager.yml"}, strings.Fields(labels)...)
		// Output: amtool warns on stderr when a config of its own names a URL.
		out, err := exec.CommandContext(ctx, amtool, args...).Output()
		cancel()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("amtool config routes test %s: %q, %v; want %s", labels, out, err, want)
		}
	}
}

func TestAlertmanagerInhibitionsNameWhatSourceAndTargetShare(t *testing.T) {
	var am struct {
		Inhibit []struct {
			Source []string `yaml:"source_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	readYAML(t, "alertmanager/alertmanager.yml", &am)
	for _, r := range am.Inhibit {
		if len(r.Equal) == 0 {
			t.Errorf("inhibit rule %v has no equal: it mutes its targets whatever their cause", r.Source)
		}
	}
}

// TestAlertmanagerMutesOnlyAlertsOfTheSameCause runs Alertmanager with the
// shipped configuration, sends it alerts as Prometheus would, and checks
// which ones it mutes: a page mutes the alerts it explains, never an alert
// of another cause.
func TestAlertmanagerMutesOnlyAlertsOfTheSameCause(t *testing.T) {
	tool(t, "amtool") // the package that has amtool has Alertmanager
	for _, tc := range []struct {
		name   string
		alerts []map[string]string
		muted  []string // by alertname/cause/instance
	}{{
		name: "the backend down mutes the edge's errors it causes, not those Redis causes",
		alerts: []map[string]string{
			{"alertname": "BackendDown", "severity": "critical", "cause": "backend", "job": "orgsvc"},
			{"alertname": "BackendReplicaDown", "severity": "warning", "cause": "backend", "job": "orgsvc", "instance": "10.0.0.3:9092"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "backend"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "redis"},
			{"alertname": "EdgeAvailabilityBudgetBurnSlow", "severity": "warning", "cause": "issuer"},
			{"alertname": "EdgeAvailabilityBudgetBurnSlow", "severity": "warning", "cause": "backend"},
		},
		muted: []string{"BackendReplicaDown/backend/10.0.0.3:9092", "EdgeHighErrorRatio/backend/", "EdgeAvailabilityBudgetBurnSlow/backend/"},
	}, {
		name: "one backend pod down mutes nothing",
		alerts: []map[string]string{
			{"alertname": "BackendReplicaDown", "severity": "warning", "cause": "backend", "job": "orgsvc", "instance": "10.0.0.3:9092"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "backend"},
			// A canary, so that the test knows Alertmanager has read every alert.
			{"alertname": "EdgeTooFewReplicas", "severity": "critical", "job": "edge"},
			{"alertname": "EdgeReplicaDown", "severity": "warning", "job": "edge", "instance": "edge-2:9090"},
		},
		muted: []string{"EdgeReplicaDown//edge-2:9090"},
	}, {
		name: "no backend in an edge's rotation mutes the backends out of it and the errors they cause, not Redis's",
		alerts: []map[string]string{
			{"alertname": "EdgeNoBackendInRotation", "severity": "critical", "cause": "backend", "instance": "edge-1:9090"},
			{"alertname": "EdgeBackendOutOfRotation", "severity": "warning", "cause": "backend", "backend": "10.0.0.1:8082"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "backend"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "redis"},
		},
		muted: []string{"EdgeBackendOutOfRotation/backend/", "EdgeHighErrorRatio/backend/"},
	}, {
		name: "every backend pod down pages once, for BackendDown",
		alerts: []map[string]string{
			{"alertname": "BackendDown", "severity": "critical", "cause": "backend", "job": "orgsvc"},
			{"alertname": "EdgeNoBackendInRotation", "severity": "critical", "cause": "backend", "instance": "edge-1:9090"},
			{"alertname": "EdgeBackendOutOfRotation", "severity": "warning", "cause": "backend", "backend": "10.0.0.1:8082"},
		},
		muted: []string{"EdgeNoBackendInRotation/backend/edge-1:9090", "EdgeBackendOutOfRotation/backend/"},
	}, {
		name: "a fast budget burn mutes the error ratio of its cause only",
		alerts: []map[string]string{
			{"alertname": "EdgeAvailabilityBudgetBurnFast", "severity": "critical", "cause": "redis"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "redis"},
			{"alertname": "EdgeHighErrorRatio", "severity": "critical", "cause": "backend"},
		},
		muted: []string{"EdgeHighErrorRatio/redis/"},
	}, {
		name: "too few edge replicas mutes the replica alerts of its job only",
		alerts: []map[string]string{
			{"alertname": "EdgeTooFewReplicas", "severity": "critical", "job": "edge"},
			{"alertname": "EdgeReplicaDown", "severity": "warning", "job": "edge", "instance": "edge-2:9090"},
			{"alertname": "EdgeReplicaDown", "severity": "warning", "job": "edge-canary", "instance": "canary-1:9090"},
		},
		muted: []string{"EdgeReplicaDown//edge-2:9090"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			url := startAlertmanager(t)
			postAlerts(t, url, tc.alerts)
			want := map[string]bool{}
			for _, m := range tc.muted {
				want[m] = true
			}
			// Every source mutes something: once all the alerts expected
			// muted are, Alertmanager has read every source, and the rest
			// are final.
			var got map[string]bool
			deadline := time.Now().Add(30 * time.Second)
			for {
				got = mutedAlerts(t, url, len(tc.alerts))
				done := true
				for m := range want {
					done = done && got[m]
				}
				if done || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("muted %v, want %v", keys(got), tc.muted)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// startAlertmanager runs Alertmanager (Debian's prometheus-alertmanager)
// with deploy/alertmanager/alertmanager.yml until the test ends, without
// clustering, and returns its URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	bin := tool(t, "prometheus-alertmanager", "alertmanager")
	listen := freeAddr(t)
	return startDaemon(t, "http://"+listen, "/-/ready", bin, "--config.file=alertmanager/alertmanager.yml",
		"--storage.path="+t.TempDir(), "--web.listen-address="+listen, "--cluster.listen-address=")
}

// postAlerts sends firing alerts, in one batch, as Prometheus does.
func postAlerts(t *testing.T, url string, alerts []map[string]string) {
	t.Helper()
	type alert struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
	now := time.Now()
	var batch []alert
	for _, a := range alerts {
		batch = append(batch, alert{Labels: a, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
	}
	body, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("POST /api/v2/alerts: %s: %s", resp.Status, msg)
	}
}

// mutedAlerts returns the alerts Alertmanager holds inhibited, as
// alertname/cause/instance, after checking that it holds all n.
func mutedAlerts(t *testing.T, url string, n int) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v2/alerts", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State       string   `json:"state"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&alerts); err != nil {
		t.Fatal(err)
	}
	if len(alerts) != n {
		t.Fatalf("Alertmanager holds %d alerts, want %d", len(alerts), n)
	}
	muted := map[string]bool{}
	for _, a := range alerts {
		if len(a.Status.InhibitedBy) > 0 {
			muted[a.Labels["alertname"]+"/"+a.Labels["cause"]+"/"+a.Labels["instance"]] = true
		}
	}
	return muted
}
