package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testenv"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestSighupReloadsTheConfigFile(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Redis.Addr = testenv.RedisAddr(t)
	cfg.Redis.KeyPrefix = testenv.Unique("sighup") + ":"
	cfg.Listen.Addr, cfg.Admin.Addr = freePort(t), freePort(t)
	cfg.Upstream.URL = "http://127.0.0.1:9" // never called here
	cfg.OIDC.IssuerURL = "http://127.0.0.1:9/realms/dev"
	cfg.OIDC.Audience = "api"
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", path, "-reload-interval", "0"}, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("edge did not stop")
		}
	})
	metrics := func() string {
		res, err := http.Get("http://" + cfg.Admin.Addr + "/metrics")
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	wait := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(metrics(), want) {
			select {
			case err := <-done:
				done <- err // for the cleanup
				t.Fatalf("edge stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %q in the metrics after 20s", what, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The listeners open after SIGHUP is caught: once the admin listener
	// answers, a SIGHUP reloads instead of ending the process.
	wait("start", `edge_config_reloads_total{result="success"} 0`)
	cfg.Limits.Plans["free"] = config.Plan{RequestsPerMinute: 1, Burst: 1}
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("reload", `edge_config_reloads_total{result="success"} 1`)
}
