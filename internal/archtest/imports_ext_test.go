package archtest_test

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// doc is the page whose import table the build checks.
const doc = "docs/architecture.md"

// tableRow is a row of the import table: the packages it is about and the
// patterns of the packages they may import.
type tableRow struct {
	packages []string
	allowed  []string // a package, or "x/..." for x and everything under it
	line     int
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// importTable reads the table that follows the "| Package | Owns | May
// import |" header of the doc, resolving each name in backquotes against
// own, the module's packages (module-relative paths).
func importTable(t *testing.T, own map[string]bool) []tableRow {
	t.Helper()
	data, err := os.ReadFile("../../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| Package | Owns | May import |") })
	if start < 0 {
		t.Fatalf("%s has no table headed | Package | Owns | May import |", doc)
	}
	resolve := func(name string, line int) string {
		base, tree := strings.CutSuffix(name, "/...")
		for _, p := range []string{base, "edge/" + base, "internal/" + base} {
			if own[p] {
				if tree {
					return p + "/..."
				}
				return p
			}
		}
		t.Errorf("%s:%d: the table names `%s`, which is no package of the module", doc, line, name)
		return ""
	}
	var rows []tableRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a row of %d cells, want 3 (Package, Owns, May import)", doc, i+1, len(cells))
		}
		r := tableRow{line: i + 1}
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			r.packages = append(r.packages, resolve(m[1], i+1))
		}
		for _, m := range backquoted.FindAllStringSubmatch(cells[2], -1) {
			r.allowed = append(r.allowed, resolve(m[1], i+1))
		}
		if len(r.packages) == 0 {
			t.Errorf("%s:%d: the row names no package in its first cell", doc, i+1)
		}
		rows = append(rows, r)
	}
	return rows
}

func allows(patterns []string, p string) bool {
	for _, a := range patterns {
		if tree, ok := strings.CutSuffix(a, "/..."); ok && (p == tree || strings.HasPrefix(p, tree+"/")) || a == p {
			return true
		}
	}
	return false
}

// TestTheImportTableIsWhatTheBuildImports: docs/architecture.md's table
// says which of the project's packages each package may import. Every
// package under edge/ and internal/ has a row, and every import of a
// package of the module (but gen/, the API's generated code) in its
// non-test files is one its row allows.
func TestTheImportTableIsWhatTheBuildImports(t *testing.T) {
	imports := map[string][]string{} // module-relative path: its imports of the module
	own := map[string]bool{}
	for _, line := range goListLines(t, "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "./...") {
		path, deps, _ := strings.Cut(line, ":")
		path = strings.TrimPrefix(path, module+"/")
		own[path] = true
		for _, d := range strings.Fields(deps) {
			if d, ok := strings.CutPrefix(d, module+"/"); ok && !strings.HasPrefix(d, "gen/") {
				imports[path] = append(imports[path], d)
			}
		}
	}

	rowOf := map[string]tableRow{}
	for _, r := range importTable(t, own) {
		for _, p := range r.packages {
			if prev, ok := rowOf[p]; ok {
				t.Errorf("%s:%d: %s has a row already (line %d)", doc, r.line, p, prev.line)
			}
			rowOf[p] = r
		}
	}
	for p := range own {
		if !strings.HasPrefix(p, "edge/") && !strings.HasPrefix(p, "internal/") && p != "edge" {
			continue
		}
		if _, ok := rowOf[p]; !ok {
			t.Errorf("%s: %s has no row in the import table", doc, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(rowOf)) {
		r := rowOf[p]
		may := strings.Join(r.allowed, ", ")
		if may == "" {
			may = "nothing of the project"
		}
		for _, d := range imports[p] {
			if !allows(r.allowed, d) {
				t.Errorf("%s imports %s, which its row in %s (line %d) does not allow (May import: %s)", p, d, doc, r.line, may)
			}
		}
	}
}
