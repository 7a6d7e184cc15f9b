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

// A killed server's port, kept dead, refuses connections, even though the
// connections the server closed linger in TIME_WAIT on it.
func TestKeepDeadRefusesAfterTheListenerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.Close() // the server closes first: its side waits in TIME_WAIT
		}
		accepted <- err
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a connection the server closed: no error")
	}
	_ = c.Close()
	_ = ln.Close()

	testkit.KeepDead(t, addr)
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}
