package testkit

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
	args []string // more redis-server arguments
	// exited is closed once cmd has exited and been waited for.
	exited <-chan struct{}
}

// StartRedisServer starts a private redis-server on a free loopback port
// (skipped without the binary, failed under CI).
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	return startRedisServer(t)
}

func startRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	return startRedisServerWith(t, func() []string { return args })
}

// startRedisServerWith starts a private redis-server on a free loopback port
// with the arguments args returns. A port is free when the test takes it,
// but in a parallel run another test's server may bind it before this one
// does; the server then starts again on other ports (args is called again,
// for any port of its own, such as a cluster bus port).
func startRedisServerWith(t testing.TB, args func() []string) *RedisServer {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if testenv.InCI() {
				t.Fatalf("%s is required under CI=true", bin)
			}
			t.Skipf("no %s on PATH", bin)
		}
	}
	s := &RedisServer{t: t}
	t.Cleanup(s.Stop)
	for attempt := 1; ; attempt++ {
		// A directory of its own each time: a cluster node that failed to
		// bind may have written its nodes.conf there, ports and all.
		s.Addr, s.args, s.dir = freeAddr(t), args(), t.TempDir()
		err := s.start()
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("%v; starting it again on other ports", err)
		s.Stop()
	}
}

// errPortTaken is a start's failure because another process bound a port
// of the server's first.
var errPortTaken = errors.New("another process took a port of the server")

// freeAddr returns a loopback address free now (another process may take
// it before it is bound: Start then fails, naming it).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RedisCluster is a Redis Cluster of the test's own: three masters, no
// replicas, a one-second node timeout, so that a test may kill a master.
type RedisCluster struct {
	Nodes []*RedisServer
}

// StartRedisCluster starts three cluster nodes on free loopback ports
// (bus ports too), joins them, and waits until every node reports
// cluster_state:ok.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	var addrs []string
	for range 3 {
		n := startRedisServerWith(t, func() []string {
			_, bus, _ := net.SplitHostPort(freeAddr(t))
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000", "--cluster-port", bus}
		})
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	out, err := exec.CommandContext(ctx, "redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(t)
	return c
}

// Addrs are the nodes' addresses, the seeds of a cluster client.
func (c *RedisCluster) Addrs() []string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// WaitHealthy waits until every node reports cluster_state:ok.
func (c *RedisCluster) WaitHealthy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = cl.Close()
				t.Fatalf("cluster node %s not ok after 30s: %v\n%s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
}

// MasterOf returns the node that serves key's slot.
func (c *RedisCluster) MasterOf(t testing.TB, key string) *RedisServer {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := cl.ClusterShards(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > slot || slot > r.End {
				continue
			}
			for _, sn := range sh.Nodes {
				for _, n := range c.Nodes {
					if sn.Role == "master" && n.Addr == net.JoinHostPort(sn.IP, strconv.FormatInt(sn.Port, 10)) {
						return n
					}
				}
			}
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return nil
}

// Start starts the server (again) on its address and waits until it
// answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// start starts the server and waits until it answers. Its error wraps
// errPortTaken when another process holds one of the server's ports.
func (s *RedisServer) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	logfile := filepath.Join(s.dir, "redis.log")
	_ = os.Remove(logfile) // a log names this start's failure only
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", logfile}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(s.cmd)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	// Only our own process's answer counts.
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(logfile)
			if bytes.Contains(log, []byte("Address already in use")) {
				return fmt.Errorf("redis-server on %s exited: %w\n%s", s.Addr, errPortTaken, log)
			}
			return fmt.Errorf("redis-server on %s exited before it answered\n%s", s.Addr, log)
		default:
		}
		pid, err := processID(c)
		if err == nil && pid == s.cmd.Process.Pid {
			return nil
		}
		if err == nil {
			return fmt.Errorf("redis-server on %s answers as process %d, not the test's own %d: %w", s.Addr, pid, s.cmd.Process.Pid, errPortTaken)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logfile)
			return fmt.Errorf("redis-server on %s did not answer: %v\n%s", s.Addr, err, log)
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
	<-s.exited
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
