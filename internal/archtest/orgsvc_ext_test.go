package archtest_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/orgedge/edge"

// goList runs go list with args in the module's root and returns its
// output's words.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	return strings.Fields(strings.Join(goListLines(t, args...), "\n"))
}

// goListLines runs go list with args in the module's root and returns its
// output's lines.
func goListLines(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if e := (*exec.ExitError)(nil); errors.As(err, &e) {
			stderr = e.Stderr
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestTheBackendDependsOnNoEdgePackage: the backend (orgsvc and what it
// imports, internal/bodydeadline among them) is built and deployed on its
// own, so a change to the edge must not reach it.
func TestTheBackendDependsOnNoEdgePackage(t *testing.T) {
	for _, dep := range goList(t, "-deps", "./orgsvc/...", "./cmd/orgsvc") {
		if strings.HasPrefix(dep, module+"/edge/") || dep == module+"/edge" {
			t.Errorf("the backend depends on the edge's package %s (go list -deps ./orgsvc/... ./cmd/orgsvc)", strings.TrimPrefix(dep, module+"/"))
		}
	}
}
