package main

import (
	"bufio"
	"encoding/json"
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
	t.Parallel()
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
	e := runBuilt(t, bin, cfg, "/healthz")
	cmd, stderr, exited := e.cmd, e.stderr, e.exited
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
