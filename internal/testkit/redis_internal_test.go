package testkit

import (
	"errors"
	"net"
	"os/exec"
	"testing"

	"github.com/orgedge/edge/internal/testenv"
)

// A redis-server whose port, or cluster bus port, another process bound
// first fails to start with errPortTaken, which a first start answers by
// taking other ports (CI failed on "bind: Address already in use" for a
// bus port on 2026-12-06).
func TestRedisStartNamesATakenPort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is required under CI=true")
		}
		t.Skip("no redis-server on PATH")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, takenPort, _ := net.SplitHostPort(taken.Addr().String())

	for name, s := range map[string]*RedisServer{
		"port":     {t: t, dir: t.TempDir(), Addr: taken.Addr().String()},
		"bus port": {t: t, dir: t.TempDir(), Addr: freeAddr(t), args: []string{"--cluster-enabled", "yes", "--cluster-port", takenPort}},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.start()
			s.Stop()
			if !errors.Is(err, errPortTaken) {
				t.Fatalf("start with a taken %s: %v, want errPortTaken", name, err)
			}
		})
	}
}
