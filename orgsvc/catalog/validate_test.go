package catalog_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/orgedge/edge/orgsvc/catalog"
)

const validYAML = `
# The shop: a web front, its API and a database.
name: shop
description: The shop's web front, API and database.
services:
  web:
    image: nginx:1.27
    ports: [80, 443]
    depends_on: [api]
  api:
    image: ghcr.io/orgedge/shop-api:1.4.2
    ports:
      - 8080
    env:
      DATABASE_URL: postgres://db:5432/shop
      LOG_LEVEL: info
      WORKERS: 4
      RATIO: 0.5
      DEBUG: false
    depends_on: [db]
    resources: {vcpus: 2, memory_gb: 4}
  db:
    image: postgres:16
    env:
    resources:
      vcpus: 1
      memory_gb: 2
`

const validJSON = `{
  "name": "shop",
  "description": "The shop's web front, API and database.",
  "services": {
    "web": {"image": "nginx:1.27", "ports": [80, 443], "depends_on": ["api"]},
    "api": {
      "image": "ghcr.io/orgedge/shop-api:1.4.2",
      "ports": [8080],
      "env": {"DATABASE_URL": "postgres://db:5432/shop", "LOG_LEVEL": "info", "WORKERS": 4, "RATIO": 0.5, "DEBUG": false},
      "depends_on": ["db"],
      "resources": {"vcpus": 2, "memory_gb": 4}
    },
    "db": {"image": "postgres:16", "env": null, "resources": {"vcpus": 1, "memory_gb": 2}}
  }
}`

// withServices returns a document named shop with the given YAML under
// services, indented by the caller as it would be in the document.
func withServices(services string) string {
	return "name: shop\nservices:\n" + services
}

// aliasBomb returns a "billion laughs" document: a few hundred bytes that
// stand for 10^levels strings when aliases are expanded.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("name: shop\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "services:\n  web:\n    image: nginx\n    env:\n      BOMB: *l%d\n", levels)
	return b.String()
}

// want is a violation a test expects: the path exactly, the message in part.
type want struct{ path, message string }

var validateTests = []struct {
	name    string
	content string
	want    []want // nil means valid
}{
	{"valid YAML", validYAML, nil},
	{"valid JSON", validJSON, nil},
	{"description of 2000 characters", "name: shop\ndescription: " + strings.Repeat("é", 2000) + "\nservices: {web: {image: nginx}}", nil},
	{"name of 63 characters", "name: " + strings.Repeat("a", 63) + "\nservices: {web: {image: nginx}}", nil},
	{"ports at the limits", withServices("  web: {image: nginx, ports: [1, 65535]}\n"), nil},
	{"resources at the limits", withServices("  web: {image: nginx, resources: {vcpus: 64, memory_gb: 512}}\n"), nil},
	{"null optional fields", withServices("  web: {image: nginx, ports: ~, env: ~, depends_on: ~, resources: {vcpus: ~}}\ndescription: ~\n"), nil},

	// The document as a whole.
	{"parse error", "name: shop\nservices: [web,\n", []want{{"", "cannot parse document: line"}}},
	{"JSON parse error", `{"name": "shop",, "services": {}}`, []want{{"", "cannot parse document: line 1"}}},
	{"empty content", "", []want{{"", "document is empty"}}},
	{"comments only", "# nothing yet\n", []want{{"", "document is empty"}}},
	{"null document", "---\n~\n", []want{{"", "document is empty"}}},
	{"top level is a sequence", "- web\n- db\n", []want{{"", "must be a mapping, got sequence"}}},
	{"top level is a string", `"shop"`, []want{{"", "must be a mapping, got string"}}},
	{"two documents", validYAML + "---\n" + validYAML, []want{{"", "more than one document"}}},
	{"anchor and alias", withServices("  web: &w {image: nginx}\n  db: *w\n"), []want{{"services.web", "anchors and aliases"}}},
	{"anchor in an unknown field", "x-common: &c {image: nginx}\n" + withServices("  web: {image: nginx}\n"), []want{{"x-common", "anchors and aliases"}}},
	{"alias bomb", aliasBomb(9), []want{{"l0", "this document has 101"}}},

	// Fields and types.
	{"unknown top-level field", "version: 2\n" + withServices("  web: {image: nginx}\n"), []want{{"version", "unknown field"}}},
	{"unknown service field", withServices("  web: {image: nginx, command: [run]}\n"), []want{{"services.web.command", "unknown field"}}},
	{"unknown resources field", withServices("  web: {image: nginx, resources: {gpus: 1}}\n"), []want{{"services.web.resources.gpus", "unknown field"}}},
	{"duplicate key", "name: shop\nname: shop2\nservices: {web: {image: nginx}}", []want{{"name", "duplicate key"}}},
	{"key that is not a string", "? [name]\n: shop\n" + withServices("  web: {image: nginx}\n"), []want{{"", "key must be a string, got sequence"}}},
	{"odd key is quoted in the path", withServices("  web: {image: nginx, \"a.b\": 1}\n"), []want{{`services.web["a.b"]`, "unknown field"}}},

	// name and description.
	{"name missing", "services: {web: {image: nginx}}", []want{{"name", "required"}}},
	{"name null", "name:\nservices: {web: {image: nginx}}", []want{{"name", "required"}}},
	{"name not a string", "name: 42\nservices: {web: {image: nginx}}", []want{{"name", "must be a string, got integer"}}},
	{"name with capitals", "name: Shop\nservices: {web: {image: nginx}}", []want{{"name", "not a DNS label"}}},
	{"name starting with a dash", "name: -shop\nservices: {web: {image: nginx}}", []want{{"name", "not a DNS label"}}},
	{"name of 64 characters", "name: " + strings.Repeat("a", 64) + "\nservices: {web: {image: nginx}}", []want{{"name", "not a DNS label"}}},
	{"description too long", "name: shop\ndescription: " + strings.Repeat("x", 2001) + "\nservices: {web: {image: nginx}}", []want{{"description", "at most 2000 characters, got 2001"}}},
	{"description not a string", "name: shop\ndescription: [a]\nservices: {web: {image: nginx}}", []want{{"description", "must be a string, got sequence"}}},

	// services.
	{"services missing", "name: shop\n", []want{{"services", "required"}}},
	{"services empty", "name: shop\nservices: {}\n", []want{{"services", "at least one service"}}},
	{"services not a mapping", "name: shop\nservices: [web]\n", []want{{"services", "must be a mapping, got sequence"}}},
	{"too many services", fmt.Sprintf("name: shop\nservices: {%s}\n", manyServices(51)), []want{{"services", "at most 50 services, got 51"}}},
	{"service name not a DNS label", withServices("  Web_1: {image: nginx}\n"), []want{{"services.Web_1", "not a DNS label"}}},
	{"service not a mapping", withServices("  web: nginx\n"), []want{{"services.web", "must be a mapping, got string"}}},
	{"service null", withServices("  web:\n"), []want{{"services.web", "must be a mapping, got null"}}},

	// image.
	{"image missing", withServices("  web: {ports: [80]}\n"), []want{{"services.web.image", "required"}}},
	{"image empty", withServices("  web: {image: \"\"}\n"), []want{{"services.web.image", "must not be empty"}}},
	{"image with white space", withServices("  web: {image: \"nginx 1.27\"}\n"), []want{{"services.web.image", "white space"}}},
	{"image not a string", withServices("  web: {image: 1.27}\n"), []want{{"services.web.image", "must be a string, got float"}}},

	// ports.
	{"ports not a sequence", withServices("  web: {image: nginx, ports: 80}\n"), []want{{"services.web.ports", "must be a sequence, got integer"}}},
	{"port 0", withServices("  web: {image: nginx, ports: [80, 0]}\n"), []want{{"services.web.ports[1]", "from 1 to 65535, got 0"}}},
	{"port 65536", withServices("  web: {image: nginx, ports: [65536]}\n"), []want{{"services.web.ports[0]", "from 1 to 65535, got 65536"}}},
	{"port as a string", withServices("  web: {image: nginx, ports: [\"80\"]}\n"), []want{{"services.web.ports[0]", "must be an integer from 1 to 65535, got string"}}},
	{"port beyond int64", withServices("  web: {image: nginx, ports: [99999999999999999999]}\n"), []want{{"services.web.ports[0]", "must be an integer"}}},
	{"duplicate port", withServices("  web: {image: nginx, ports: [80, 443, 80]}\n"), []want{{"services.web.ports[2]", "duplicate port 80"}}},

	// env.
	{"env not a mapping", withServices("  web: {image: nginx, env: [A=1]}\n"), []want{{"services.web.env", "must be a mapping, got sequence"}}},
	{"env name starting with a digit", withServices("  web: {image: nginx, env: {1A: x}}\n"), []want{{"services.web.env.1A", "must match"}}},
	{"env name with a dot", withServices("  web: {image: nginx, env: {a.b: x}}\n"), []want{{`services.web.env["a.b"]`, "must match"}}},
	{"env value a mapping", withServices("  web: {image: nginx, env: {A: {b: c}}}\n"), []want{{"services.web.env.A", "got mapping"}}},
	{"env value null", withServices("  web: {image: nginx, env: {A: ~}}\n"), []want{{"services.web.env.A", "got null"}}},

	// depends_on.
	{"dependency on no service", withServices("  web: {image: nginx, depends_on: [db]}\n"), []want{{"services.web.depends_on[0]", `no service named "db"`}}},
	{"dependency on itself", withServices("  web: {image: nginx, depends_on: [web]}\n"), []want{{"services.web.depends_on[0]", "cannot depend on itself"}}},
	{"duplicate dependency", withServices("  web: {image: nginx, depends_on: [db, db]}\n  db: {image: postgres}\n"), []want{{"services.web.depends_on[1]", `duplicate dependency on "db"`}}},
	{"dependency not a string", withServices("  web: {image: nginx, depends_on: [[db]]}\n"), []want{{"services.web.depends_on[0]", "must be a string, got sequence"}}},
	{"depends_on not a sequence", withServices("  web: {image: nginx, depends_on: db}\n"), []want{{"services.web.depends_on", "must be a sequence, got string"}}},
	{"dependency cycle", withServices("  web: {image: nginx, depends_on: [api]}\n  api: {image: api, depends_on: [db]}\n  db: {image: postgres, depends_on: [web]}\n"),
		[]want{{"services.db.depends_on[0]", `dependency cycle: "web" -> "api" -> "db" -> "web"`}}},
	{"two cycles", withServices("  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n  c: {image: x, depends_on: [d]}\n  d: {image: x, depends_on: [c]}\n"),
		[]want{{"services.b.depends_on[0]", `"a" -> "b" -> "a"`}, {"services.d.depends_on[0]", `"c" -> "d" -> "c"`}}},

	// resources.
	{"resources not a mapping", withServices("  web: {image: nginx, resources: 2}\n"), []want{{"services.web.resources", "must be a mapping, got integer"}}},
	{"no vcpus", withServices("  web: {image: nginx, resources: {vcpus: 0}}\n"), []want{{"services.web.resources.vcpus", "from 1 to 64, got 0"}}},
	{"too many vcpus", withServices("  web: {image: nginx, resources: {vcpus: 65}}\n"), []want{{"services.web.resources.vcpus", "from 1 to 64, got 65"}}},
	{"too much memory", withServices("  web: {image: nginx, resources: {memory_gb: 513}}\n"), []want{{"services.web.resources.memory_gb", "from 1 to 512, got 513"}}},
	{"memory as a string", withServices("  web: {image: nginx, resources: {memory_gb: 4GB}}\n"), []want{{"services.web.resources.memory_gb", "must be an integer from 1 to 512, got string"}}},

	// Several at once, in document order.
	{"violations in document order", "services:\n  web: {image: \"\", ports: [0]}\nextra: 1\ndescription: [x]\n", []want{
		{"name", "required"}, // reported where the mapping starts
		{"services.web.image", "must not be empty"},
		{"services.web.ports[0]", "from 1 to 65535"},
		{"extra", "unknown field"},
		{"description", "must be a string"},
	}},
}

// manyServices returns n services in YAML flow style.
func manyServices(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("s%d: {image: nginx}", i)
	}
	return strings.Join(s, ", ")
}

func TestValidateReportsEachViolationAtItsPath(t *testing.T) {
	for _, tt := range validateTests {
		t.Run(tt.name, func(t *testing.T) {
			got := catalog.Validate(tt.content)
			if !matches(got, tt.want) {
				t.Errorf("Validate() =\n%s\nwant\n%s", format(got), formatWant(tt.want))
			}
		})
	}
}

func matches(got []catalog.Violation, want []want) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Path != want[i].path || !strings.Contains(got[i].Message, want[i].message) {
			return false
		}
	}
	return true
}

func format(vs []catalog.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "\t%s: %s\n", v.Path, v.Message)
	}
	return b.String()
}

func formatWant(ws []want) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "\t%s: …%s…\n", w.path, w.message)
	}
	return b.String()
}

func TestValidateValidDocumentIsNil(t *testing.T) {
	for _, content := range []string{validYAML, validJSON} {
		if got := catalog.Validate(content); got != nil {
			t.Errorf("Validate() = %#v, want nil", got)
		}
	}
}

func TestValidateRejectsAliasBombWithoutExpandingIt(t *testing.T) {
	// Expanded, 20 levels would be 10^20 strings: the test would never end
	// if the check followed aliases.
	got := catalog.Validate(aliasBomb(20))
	if len(got) != 1 || !strings.Contains(got[0].Message, "anchors and aliases") {
		t.Errorf("Validate() =\n%s\nwant one violation about anchors and aliases", format(got))
	}
}

func TestValidateLargeDocumentIsBounded(t *testing.T) {
	// Nearly 1 MiB of unknown fields: every one is a violation, but only
	// MaxViolations come back, the last saying how many more there were.
	var b strings.Builder
	b.WriteString(withServices("  web: {image: nginx}\n"))
	n := 0
	for b.Len() < 1<<20-32 {
		fmt.Fprintf(&b, "x%d: 1\n", n)
		n++
	}
	got := catalog.Validate(b.String())
	if len(got) != catalog.MaxViolations {
		t.Fatalf("got %d violations, want %d", len(got), catalog.MaxViolations)
	}
	if got[0].Path != "x0" || got[catalog.MaxViolations-2].Path != fmt.Sprintf("x%d", catalog.MaxViolations-2) {
		t.Errorf("violations not in document order: first %v, next to last %v", got[0], got[catalog.MaxViolations-2])
	}
	last := got[len(got)-1]
	if wantMsg := fmt.Sprintf("%d more not shown", n-(catalog.MaxViolations-1)); last.Path != "" || !strings.Contains(last.Message, wantMsg) {
		t.Errorf("last violation = %+v, want one saying %q", last, wantMsg)
	}
}

func TestValidateDeepNestingDoesNotCrash(t *testing.T) {
	for _, content := range []string{
		"name: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		"name: " + strings.Repeat("{a: ", 9_000) + "1" + strings.Repeat("}", 9_000),
		"x: " + strings.Repeat("[", 9_000) + "&a 1, *a" + strings.Repeat("]", 9_000),
	} {
		if got := catalog.Validate(content); len(got) == 0 {
			t.Errorf("Validate(%.20q…) = no violations", content)
		}
	}
}

func FuzzValidate(f *testing.F) {
	for _, tt := range validateTests {
		f.Add(tt.content)
	}
	f.Fuzz(func(t *testing.T, content string) {
		got := catalog.Validate(content)
		if again := catalog.Validate(content); !slices.Equal(got, again) {
			t.Fatalf("Validate is not deterministic:\n%s\nthen\n%s", format(got), format(again))
		}
		if got != nil && len(got) == 0 {
			t.Fatal("Validate returned an empty, non-nil slice")
		}
		if len(got) > catalog.MaxViolations {
			t.Fatalf("Validate returned %d violations, more than MaxViolations", len(got))
		}
		for _, v := range got {
			if v.Message == "" {
				t.Fatalf("violation without a message: %+v", v)
			}
		}
	})
}
