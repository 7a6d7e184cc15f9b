package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildEdge builds the edge command into the test's temporary directory:
// the tests that run it see what an operator sees, its exit status and its
// stderr.
func buildEdge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edge")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/edge: %v\n%s", err, out)
	}
	return bin
}

// edgeEnv is the test's environment without EDGE_* variables, plus env.
func edgeEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EDGE_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// runEdge runs the built edge to its end and returns its stdout, its
// stderr and its error (an *exec.ExitError for a non-zero status).
func runEdge(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
