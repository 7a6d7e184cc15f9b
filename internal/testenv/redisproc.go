package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProcess is a redis-server (or sentinel) of a test's own, which the
// test may stop, kill and restart: for outages and failovers that the
// shared server of scripts/test must not go through.
type RedisProcess struct {
	// Addr is 127.0.0.1:port; Port the same port.
	Addr string
	Port int
	// Dir is the process's working directory (its config, log and files).
	Dir string

	t    testing.TB
	opts RedisProcessOptions

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	release func() // after Kill, until Restart: releases the port's holder (HoldPort)
}

// RedisProcessOptions say how to run one process.
type RedisProcessOptions struct {
	// Args are redis-server's arguments for a port and a directory of its
	// own. Nil: a plain server (--port, --bind 127.0.0.1, no persistence).
	Args func(port int, dir string) []string
	// Ping reports whether the process serves on addr. Nil: a PING over
	// plain TCP.
	Ping func(ctx context.Context, addr string) error
}

// RedisServerBinary returns the path of redis-server, or skips the test
// (fails it under CI=true). The same binary runs sentinels (--sentinel).
func RedisServerBinary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	if InCI() {
		t.Fatalf("redis-server is required under CI=true: %v (scripts/test installs it)", err)
	}
	t.Skipf("no redis-server: %v", err)
	return ""
}

// StartRedisProcess starts a redis-server on a free loopback port and waits
// until it answers; it is killed when the test ends.
func StartRedisProcess(t testing.TB, opts RedisProcessOptions) *RedisProcess {
	t.Helper()
	bin := RedisServerBinary(t)
	if opts.Args == nil {
		opts.Args = func(port int, dir string) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
		}
	}
	if opts.Ping == nil {
		opts.Ping = plainPing
	}
	p := &RedisProcess{t: t, opts: opts, Dir: t.TempDir()}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		p.Port, p.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = p.start(bin); last == nil {
			t.Cleanup(p.stop)
			return p
		}
	}
	t.Fatalf("redis-server did not start: %v", last)
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func plainPing(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// start runs the process on p.Port and waits up to 10s for it to answer.
func (p *RedisProcess) start(bin string) error {
	cmd := exec.Command(bin, p.opts.Args(p.Port, p.Dir)...)
	cmd.Dir = p.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := p.opts.Ping(pctx, p.Addr)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited on port %d: %s%s", p.Port, bytes.TrimSpace(out.Bytes()), p.Log())
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("no answer on port %d after 10s: %v\n%s", p.Port, err, p.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill ends the process at once (SIGKILL), as a crash or a lost machine
// would, and waits for it to exit. Killing a process that is not running
// does nothing. Until Restart, the port stays the test's (HoldPort): its
// clients are refused, as by a dead server, and no other test's server
// (another test's Redis, among them) takes the port and answers them.
func (p *RedisProcess) Kill() {
	p.t.Helper()
	if !p.kill() {
		return
	}
	release, err := HoldPort(p.Addr, false)
	if err != nil {
		p.t.Fatalf("redis-server killed: %v", err)
	}
	p.mu.Lock()
	p.release = release
	p.mu.Unlock()
}

// kill ends the process, if it runs, and reports whether it did.
func (p *RedisProcess) kill() bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	_ = cmd.Process.Kill()
	<-done
	return true
}

// stop ends the process and frees its port, when the test ends.
func (p *RedisProcess) stop() {
	p.kill()
	p.releasePort()
}

// releasePort closes the port's holder, if Kill left one.
func (p *RedisProcess) releasePort() {
	p.mu.Lock()
	release := p.release
	p.release = nil
	p.mu.Unlock()
	if release != nil {
		release()
	}
}

// Restart starts the process again on the same port, after Kill. The
// server binds the port while it is still held (both with SO_REUSEADDR),
// so that it is never free in between.
func (p *RedisProcess) Restart() {
	p.t.Helper()
	bin := RedisServerBinary(p.t)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = p.start(bin); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("restart redis-server on %s: %v", p.Addr, err)
	}
	p.releasePort()
}

// Log returns the end of the process's log file, if its arguments named
// one "redis.log" in Dir: for a failing test's message.
func (p *RedisProcess) Log() string {
	data, err := os.ReadFile(filepath.Join(p.Dir, "redis.log"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}
