package main

import (
	"bufio"
	"bytes"
	"context"
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
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// childArgsVar makes the test binary run as the edge command, with the
// arguments it holds (separated by U+001F), so that a test sees the process's own
// stderr.
const childArgsVar = "EDGE_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childArgsVar); args != "" {
		os.Args = append([]string{os.Args[0]}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRedisOutageLeavesOnlyJSONLinesOnStderr runs the edge command with
// JSON logs against a Redis of the test's own, kills Redis while calls
// flow, and reads the process's stderr: every line is a JSON object, and
// the Redis client's own complaints (failed dials) are among them, as
// structured "redis client" lines, rate-limited.
func TestRedisOutageLeavesOnlyJSONLinesOnStderr(t *testing.T) {
	t.Parallel()
	rs := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})

	cfg := config.Default()
	cfg.Redis.Addr = rs.Addr
	cfg.Redis.KeyPrefix = testenv.Unique("redislog") + ":"
	cfg.Redis.Timeout = 2 * time.Second
	cfg.Listen.Addr, cfg.Admin.Addr = freePort(t), freePort(t)
	cfg.Upstream.URL = be.URL
	cfg.OIDC.IssuerURL = iss.URL()
	cfg.OIDC.Audience = "api"
	cfg.Log.Format = "json"
	path := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsVar+"=-config\x1f"+path+"\x1f-reload-interval\x1f0")
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

	tok := testkit.Token(t, iss.URL(), testenv.Unique("free-redislog"))
	call := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+cfg.Listen.Addr+"/svc.v1.OrganizationService/ListOrganizations", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for call() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("the edge never answered 200; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	rs.Kill()
	// The pool redials its idle connections while Redis is down: each
	// failed dial is a line of the Redis client.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		if got := call(); got != http.StatusOK && got != http.StatusTooManyRequests {
			t.Fatalf("fail_open answered %d during the outage, want 200 (or 429 past the local share)", got)
		}
		time.Sleep(20 * time.Millisecond)
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

	redisLines := 0
	sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Errorf("a line on stderr is not JSON: %q", line)
			continue
		}
		if rec["msg"] == "redis client" {
			redisLines++
		}
	}
	if redisLines == 0 || redisLines > 5 {
		t.Errorf("%d structured lines of the Redis client during a 4 s outage, want 1 to 5 (rate-limited); stderr:\n%s", redisLines, stderr.String())
	}
}
