package edge_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

const sentinelMaster = "edge-master"

// sentinelSet is a master, its replica and two sentinels watching them,
// each a redis-server of the test's own.
type sentinelSet struct {
	master, replica *testenv.RedisProcess
	sentinels       []*testenv.RedisProcess
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	s := &sentinelSet{master: testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})}
	s.replica = testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
		Args: func(port int, dir string) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
				"--replicaof", "127.0.0.1", strconv.Itoa(s.master.Port)}
		},
	})
	for range 2 {
		s.sentinels = append(s.sentinels, testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
			Args: func(port int, dir string) []string {
				// A sentinel rewrites its configuration file: it must be its own.
				conf := filepath.Join(dir, "sentinel.conf")
				text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\n"+
					"sentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
					port, dir, sentinelMaster, s.master.Port, sentinelMaster, sentinelMaster)
				if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
					t.Error(err)
				}
				return []string{conf, "--sentinel"}
			},
		}))
	}
	// Ready when every sentinel knows the replica as in sync.
	testkit.WaitFor(t, "the sentinels to see the replica", func() bool {
		for _, sn := range s.sentinels {
			if !s.replicaKnown(t, sn.Addr) {
				return false
			}
		}
		return true
	})
	return s
}

func (s *sentinelSet) replicaKnown(t *testing.T, sentinelAddr string) bool {
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	replicas, err := c.Replicas(ctx, sentinelMaster).Result()
	if err != nil {
		return false
	}
	for _, r := range replicas {
		if r["port"] == strconv.Itoa(s.replica.Port) && r["flags"] == "slave" && r["master-link-status"] == "ok" {
			return true
		}
	}
	return false
}

func (s *sentinelSet) addrs() []string {
	var out []string
	for _, sn := range s.sentinels {
		out = append(out, sn.Addr)
	}
	return out
}

// masterAddr asks a sentinel where the master is.
func (s *sentinelSet) masterAddr(t *testing.T) string {
	t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hp, err := c.GetMasterAddrByName(ctx, sentinelMaster).Result()
	if err != nil {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	return net.JoinHostPort(hp[0], hp[1])
}

func requestsToday(t *testing.T, edgeURL, token string) int {
	t.Helper()
	res, body := jsonCall(t, edgeURL, token, getUsage, "{}")
	usage, _ := body["apiUsage"].(map[string]any)
	n, ok := usage["requestsToday"].(float64)
	if res.StatusCode != http.StatusOK || !ok {
		t.Fatalf("GetUsage: %d %v", res.StatusCode, body)
	}
	return int(n)
}

// TestSentinelFailoverUnderLoadKeepsEveryCountRedisAcknowledgedBeforeIt runs
// the edge through Sentinel, forces a failover (SENTINEL FAILOVER) while
// calls keep coming, and checks what docs/operations.md promises: the edge
// follows the new master on its own; every call Redis counted before the
// failover (and that reached the replica) is still counted; calls admitted
// while the master changed are answered (fail_open), and only those may be
// missing from the count; every call after is counted again.
func TestSentinelFailoverUnderLoadKeepsEveryCountRedisAcknowledgedBeforeIt(t *testing.T) {
	t.Parallel()
	set := startSentinelSet(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = ""
	cfg.Redis.Sentinel = config.RedisSentinel{MasterName: sentinelMaster, Addrs: set.addrs()}
	cfg.Redis.Timeout = 500 * time.Millisecond
	cfg.Limits.OnRedisFailure = config.FailOpen
	cfg.Limits.Plans = map[string]config.Plan{"big": {RequestsPerMinute: 1_000_000, RequestsPerDay: 1_000_000, Burst: 1_000_000}}
	cfg.Limits.DefaultPlan = "big"
	e := testkit.StartEdge(t, cfg)
	who := testenv.Unique("free-sentinel")
	tok := testkit.Token(t, iss.URL(), who)

	oldMaster := set.masterAddr(t)
	if oldMaster != set.master.Addr {
		t.Fatalf("sentinel names %s as master, want %s", oldMaster, set.master.Addr)
	}
	l, stop := startCallLoad(t, e.URL, tok, 4)
	defer stop()
	testkit.WaitFor(t, "calls before the failover", func() bool { return l.counts()[http.StatusOK] >= 50 })

	// Everything answered so far was counted by the master; make sure the
	// replica has it too (WAIT covers every write before this client's).
	before := l.counts()[http.StatusOK]
	mc := redis.NewClient(&redis.Options{Addr: set.master.Addr})
	defer mc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mc.Set(ctx, testenv.Unique("marker"), "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}

	sc := redis.NewSentinelClient(&redis.Options{Addr: set.sentinels[0].Addr})
	defer sc.Close()
	if err := sc.Failover(ctx, sentinelMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	testkit.WaitFor(t, "the sentinels to promote the replica", func() bool { return set.masterAddr(t) == set.replica.Addr })
	// The edge follows: calls are decided by Redis again (the new master)
	// and the breaker is closed.
	newMaster := redis.NewClient(&redis.Options{Addr: set.replica.Addr})
	defer newMaster.Close()
	scripts := func() int {
		info, err := newMaster.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range splitLines(info) {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	promoted := scripts()
	testkit.WaitFor(t, "the edge to use the new master", func() bool {
		return scripts() >= promoted+20 && containsLine(scrapeAdmin(t, e.AdminURL), "edge_fail_open_active 0")
	})
	switched := l.counts()[http.StatusOK]
	testkit.WaitFor(t, "calls after the failover", func() bool { return l.counts()[http.StatusOK] >= switched+50 })
	stop()
	c := l.counts()
	admitted := c[http.StatusOK]
	if admitted != int(l.total.Load()) {
		t.Fatalf("answers by status %v: every call should have been admitted", c)
	}

	// GetUsage counts itself.
	counted := requestsToday(t, e.URL, tok) - 1
	lost := admitted - counted
	t.Logf("admitted %d calls: %d before the failover, %d while the master changed, %d after; Redis counted %d (%d lost)",
		admitted, before, switched-before, admitted-switched, counted, lost)
	if counted < before {
		t.Fatalf("Redis counts %d calls, fewer than the %d it had counted and replicated before the failover", counted, before)
	}
	if lost < 0 || lost > switched-before {
		t.Fatalf("%d calls are missing from the count; only the %d admitted while the master changed may be", lost, switched-before)
	}
}
