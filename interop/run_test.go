package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// debianPython is Debian's interpreter, the one python3-grpcio installs
// for (a python3 earlier on PATH, such as pyenv's, does not see it).
const debianPython = "/usr/bin/python3"

// command is exec.CommandContext for a client: it runs in a process group of
// its own, all of which (a browser it started too) is killed when ctx ends.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runJSON runs a client script with in as JSON on its standard input and
// decodes the JSON report on its standard output into out.
func runJSON(t *testing.T, in, out any, name string, args ...string) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := command(ctxT(t), name, args...)
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s %v: report: %v\n%s\n%s", name, args, err, stdout.Bytes(), stderr.Bytes())
	}
}

// result is what a command-line tool did.
type result struct {
	stdout, stderr string
	exit           int
}

// runTool runs a command-line client to its end, with the variables of
// env ("NAME=value") added to the test's environment.
func runTool(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	cmd := command(ctxT(t), name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return result{stdout.String(), stderr.String(), exit.ExitCode()}
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return result{stdout.String(), stderr.String(), 0}
}

// node returns the node binary, once the npm packages of this folder are
// installed.
func node(t *testing.T) string {
	t.Helper()
	bin := testenv.Command(t, "node")
	if _, err := os.Stat("node_modules/.package-lock.json"); err != nil {
		testenv.Missing(t, "interop/node_modules", "run the tests with scripts/test, which runs npm ci in interop/")
	}
	return bin
}

// python returns Debian's python3, once it has grpcio and protobuf.
func python(t *testing.T) string {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import grpc, google.protobuf").Run(); err != nil {
		testenv.Missing(t, "python3-grpcio and python3-protobuf", "run the tests with scripts/test, which installs the Debian packages")
	}
	return debianPython
}
