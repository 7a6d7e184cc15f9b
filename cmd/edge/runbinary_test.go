package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
)

// builtEdge is the edge binary running a configuration of the test's.
type builtEdge struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	// exited receives the process's end once; a test that takes it puts
	// it back for the cleanup.
	exited chan error
}

// runBuilt writes cfg to a file, runs bin with it (no reload) until the
// test ends, and returns once the admin listener answers probe ("/healthz"
// or "/readyz") with 200.
func runBuilt(t *testing.T, bin string, cfg *config.Config, probe string) *builtEdge {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &builtEdge{stderr: &syncBuffer{}, exited: make(chan error, 1)}
	e.cmd = exec.Command(bin, "-config", path, "-reload-interval", "0")
	e.cmd.Env = edgeEnv()
	e.cmd.Stderr = e.stderr
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.exited <- e.cmd.Wait() }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.exited
	})
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := client.Get("http://" + cfg.Admin.Addr + probe)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge's %s did not answer 200; stderr:\n%s", probe, e.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
