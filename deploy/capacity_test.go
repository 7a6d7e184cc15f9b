package deploy_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// operationsDoc is docs/operations.md with its lines joined by single
// spaces, so that a sentence reads the same wherever it wraps.
func operationsDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(doc)), " ")
}

// number reads a figure as the docs write it ("1,000", "2.6").
func number(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return f
}

// bytesOf reads a Kubernetes memory quantity in Mi, Gi, M or G.
func bytesOf(t *testing.T, q string) float64 {
	t.Helper()
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Mi", 1 << 20}, {"Gi", 1 << 30}, {"M", 1e6}, {"G", 1e9}} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			return number(t, n) * u.mult
		}
	}
	t.Fatalf("memory quantity %q: want Mi, Gi, M or G", q)
	return 0
}

// TestKubernetesMemoryRequestHoldsTheCapacityPlansModel: the edge's memory
// request is what docs/operations.md's model says a working replica uses
// (idle, the top of its load, the full token cache and the open streams
// the docs name), the docs say the request the Deployment makes, and
// GOMEMLIMIT lies between the request and the limit. A request below what
// a replica uses makes it the first evicted when its node runs short.
func TestKubernetesMemoryRequestHoldsTheCapacityPlansModel(t *testing.T) {
	doc := operationsDoc(t)
	model := regexp.MustCompile(`about (\d+) MB idle, plus \d+ to (\d+) MB under load \([^)]*\), plus the token cache \([^:]*: (\d+) MB at the default bound\), plus (\d+) KB per open stream`).FindStringSubmatch(doc)
	if model == nil {
		t.Fatal(`docs/operations.md no longer states the memory model ("about N MB idle, plus N to N MB under load (…), plus the token cache (…: N MB at the default bound), plus N KB per open stream")`)
	}
	said := regexp.MustCompile(`The Deployment requests (\d+) MiB: idle, the top of the load, the full token cache and ([\d,]+) open streams`).FindStringSubmatch(doc)
	if said == nil {
		t.Fatal("docs/operations.md does not say what the Deployment's memory request holds")
	}
	streams := number(t, said[2])
	want := (number(t, model[1])+number(t, model[2])+number(t, model[3]))*1e6 + streams*number(t, model[4])*1e3

	var dep deploymentSpec
	kubeObj(t, kubeObjects(t), "Deployment/edge", "apps/v1", &dep)
	c := dep.Template.Spec.Containers[0]
	request, limit := bytesOf(t, c.Resources.Requests["memory"]), bytesOf(t, c.Resources.Limits["memory"])
	if request < want {
		t.Errorf("Deployment/edge requests %s (%.0f MB); the model (idle + load + token cache + %.0f streams) is %.0f MB", c.Resources.Requests["memory"], request/1e6, streams, want/1e6)
	}
	if number(t, said[1])*(1<<20) != request {
		t.Errorf("docs/operations.md says the Deployment requests %s MiB; it requests %s", said[1], c.Resources.Requests["memory"])
	}
	if !strings.Contains(doc, "requests one core and "+said[1]+" MiB") {
		t.Errorf(`docs/operations.md's Resources do not say "requests one core and %s MiB"`, said[1])
	}
	gomemlimit := ""
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomemlimit = strings.TrimSuffix(e.Value, "B")
		}
	}
	if gomemlimit == "" {
		t.Fatal("Deployment/edge sets no GOMEMLIMIT")
	}
	if g := bytesOf(t, gomemlimit); g < request || g >= limit {
		t.Errorf("GOMEMLIMIT %s is not between the memory request %s and the limit %s", gomemlimit, c.Resources.Requests["memory"], c.Resources.Limits["memory"])
	}
}
