package deploy_test

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
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

// TestAccessLogSamplingDefaultIsOneAnOperatorKeepsAndItsCostIsDocumented:
// log.sample_ok samples successful calls by default (every call's line is
// tens of GB a day at 1,000 calls/s), and docs/operations.md's table of
// what each setting writes agrees with the line size it states and marks
// the default.
func TestAccessLogSamplingDefaultIsOneAnOperatorKeepsAndItsCostIsDocumented(t *testing.T) {
	def := config.Default().Log.SampleOK
	if def <= 0 || def >= 1 {
		t.Fatalf("log.sample_ok defaults to %v: want a fraction of successful calls (1 writes about 26 GB a day per 1,000 calls/s; 0 none to find a call by)", def)
	}
	doc := operationsDoc(t)
	size := regexp.MustCompile(`An access line is about (\d+) B`).FindStringSubmatch(doc)
	if size == nil {
		t.Fatal(`docs/operations.md does not say how large an access line is ("An access line is about N B")`)
	}
	rows := regexp.MustCompile(`\| ([\d.]+)( \(default\))? \| ([\d.]+) million \| ([\d.]+) GB \|`).FindAllStringSubmatch(doc, -1)
	if len(rows) < 2 {
		t.Fatalf("docs/operations.md's \"Access log volume\" has %d rows of sample_ok, lines and bytes a day", len(rows))
	}
	marked := 0
	for _, r := range rows {
		f := number(t, r[1])
		lines := f * 1000 * 86400
		if got := number(t, r[3]) * 1e6; math.Abs(got-lines) > 0.01*lines {
			t.Errorf("sample_ok %s: %s million lines a day, want %.3g million at 1,000 calls/s", r[1], r[3], lines/1e6)
		}
		if got, want := number(t, r[4])*1e9, lines*number(t, size[1]); math.Abs(got-want) > 0.05*want {
			t.Errorf("sample_ok %s: %s GB a day, want %.2g GB at %s B a line", r[1], r[4], want/1e9, size[1])
		}
		if r[2] != "" {
			marked++
			if f != def {
				t.Errorf("docs/operations.md marks %s as the default; it is %v", r[1], def)
			}
		}
	}
	if marked != 1 {
		t.Errorf("docs/operations.md marks %d rows (default), want the one of %v", marked, def)
	}
	edgeDoc, err := os.ReadFile("../docs/edge.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "`log.sample_ok` (default " + strconv.FormatFloat(def, 'f', -1, 64) + ")"; !strings.Contains(string(edgeDoc), want) {
		t.Errorf("docs/edge.md does not say %s", want)
	}
}
