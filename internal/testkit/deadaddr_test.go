package testkit_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/orgedge/edge/internal/testkit"
)

// A dead address refuses connections, and no listener can take its port
// while the test runs (with SO_REUSEADDR, as Go's listeners set it).
func TestDeadAddrRefusesAndCannotBeTaken(t *testing.T) {
	addr := testkit.DeadAddr(t)
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	for _, a := range []string{addr, "0.0.0.0" + addr[len("127.0.0.1"):]} {
		if ln, err := net.Listen("tcp", a); err == nil {
			_ = ln.Close()
			t.Fatalf("listen %s: the dead address's port was given to a listener", a)
		}
	}
}
