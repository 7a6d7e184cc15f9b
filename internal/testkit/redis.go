package testkit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/internal/testenv"
)

// RedisServer is a redis-server of the test's own, which it may stop and
// start again on the same address (outages), and whose command counts no
// other test disturbs.
type RedisServer struct {
	Addr string
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
}

// StartRedisServer starts a private redis-server on a free loopback port
// (skipped without the binary, failed under CI).
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is required under CI=true")
		}
		t.Skip("no redis-server on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := &RedisServer{Addr: addr, t: t, dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server (again) and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	// The port was free when the test took it, but another process may have
	// bound it since: only our own process's answer counts.
	for {
		pid, err := processID(c)
		if err == nil && pid == s.cmd.Process.Pid {
			return
		}
		if err == nil {
			s.t.Fatalf("redis-server on %s answers as process %d, not the test's own %d: another server took the port", s.Addr, pid, s.cmd.Process.Pid)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processID reads process_id from INFO server.
func processID(c *redis.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no process_id in INFO server")
}

// Stop kills the server, as a crash or a network partition would.
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Calls returns how many commands the server has run, by command name, from
// INFO commandstats.
func (s *RedisServer) Calls(t testing.TB) map[string]int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_evalsha:calls=3,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.Atoi(v)
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls
}

// Total sums calls of every command but those named.
func Total(calls map[string]int, except ...string) int {
	n := 0
	for name, c := range calls {
		skip := false
		for _, e := range except {
			skip = skip || e == name
		}
		if !skip {
			n += c
		}
	}
	return n
}

// String names the server for messages.
func (s *RedisServer) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
