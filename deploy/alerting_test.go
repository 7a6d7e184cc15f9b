package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

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

func TestKubernetesMonitoringMatchesComposeRulesAndScrapesTheEdge(t *testing.T) {
	var rules, compose struct {
		Spec struct {
			Groups any `yaml:"groups"`
		} `yaml:"spec"`
		Groups any `yaml:"groups"`
	}
	readYAML(t, "k8s/monitoring/prometheusrule.yaml", &rules)
	readYAML(t, "prometheus/alerts.yml", &compose)
	if rules.Spec.Groups == nil || !reflect.DeepEqual(rules.Spec.Groups, compose.Groups) {
		t.Error("k8s/monitoring/prometheusrule.yaml's groups differ from prometheus/alerts.yml: run deploy/k8s/monitoring/regenerate.sh")
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
		if job := svc.Metadata.Labels[sm.Spec.JobLabel]; job != "edge" {
			t.Errorf("ServiceMonitor gives Service %s the job %q, want edge (the alerts' job)", svc.Metadata.Name, job)
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
