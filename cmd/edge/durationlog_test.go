package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testenv"
)

// TestJSONLogsWriteDurationsAsGoDurations runs the built edge with JSON
// logs, stops it with SIGTERM and reads its stderr: the grace it drains
// for is written as the configuration writes it ("1.5s"), not as integer
// nanoseconds.
func TestJSONLogsWriteDurationsAsGoDurations(t *testing.T) {
	bin := buildEdge(t)
	cfg := config.Default()
	cfg.Redis.Addr = testenv.RedisAddr(t)
	cfg.Redis.KeyPrefix = testenv.Unique("durationlog") + ":"
	cfg.Listen.Addr, cfg.Admin.Addr = freePort(t), freePort(t)
	cfg.Listen.ShutdownGrace = 1500 * time.Millisecond
	cfg.Upstream.URL = "http://127.0.0.1:9" // never called here
	cfg.OIDC.IssuerURL = "http://127.0.0.1:9/realms/dev"
	cfg.OIDC.Audience = "api"
	cfg.Log.Format = "json"
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	var stderr syncBuffer
	cmd := exec.Command(bin, "-config", path, "-reload-interval", "0")
	cmd.Env = edgeEnv()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := client.Get("http://" + cfg.Admin.Addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge's admin listener did not answer; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the edge did not stop on SIGTERM")
	}
	exited <- nil // for the cleanup

	grace := ""
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a line on stderr is not JSON: %q", sc.Bytes())
			continue
		}
		if g, ok := rec["grace"]; ok {
			grace, _ = g.(string)
			if grace != "1.5s" {
				t.Errorf("grace written as %#v, want \"1.5s\": %s", g, sc.Bytes())
			}
		}
	}
	if grace == "" {
		t.Errorf("no line names the shutdown grace; stderr:\n%s", stderr.String())
	}
}
