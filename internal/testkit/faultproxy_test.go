package testkit_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/orgedge/edge/internal/testkit"
)

// A refusing fault proxy refuses connections as a server that is down does,
// and keeps its port meanwhile: no other server can listen on it (in a
// parallel run, another test's server took the freed port and answered in
// the refused server's place). Healed, it forwards on the same port again.
func TestFaultProxyRefusesAndKeepsItsPort(t *testing.T) {
	server, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	go func() {
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}()
	p := testkit.StartFaultProxy(t, server.Addr().String())
	greeted := func(when string) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatalf("%s: dial %s: %v", when, p.Addr, err)
		}
		defer c.Close()
		if b, err := io.ReadAll(c); err != nil || string(b) != "hi" {
			t.Fatalf("%s: read %q, %v; want the server's hi", when, b, err)
		}
	}
	greeted("before the fault")

	p.Refuse()
	if c, err := net.Dial("tcp", p.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial %s while refusing: %v, want connection refused", p.Addr, err)
	}
	if ln, err := net.Listen("tcp", p.Addr); err == nil {
		_ = ln.Close()
		t.Fatalf("listen %s: the refusing proxy's port was given to another listener", p.Addr)
	}

	p.Heal()
	greeted("healed")
}
