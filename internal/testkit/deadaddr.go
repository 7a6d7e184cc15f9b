package testkit

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/orgedge/edge/internal/testenv"
)

// DeadAddr returns a loopback address ("127.0.0.1:port") where nothing
// listens for as long as t runs: a connection to it is refused.
//
// Its port is held by a socket that is bound but never listens, without
// SO_REUSEADDR, so no listener on this machine can be given the port
// meanwhile. Closing a listener, the obvious way to get a dead port, leaves
// it free for the next bind of port 0, and in a parallel run another test's
// server can take it: a "dead" backend then answers as that server, or as
// the edge itself, which forwarded every call to itself until the subject's
// rate limit ended the loop.
func DeadAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("dead address: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("dead address: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("dead address: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("dead address: bound to %T, want an IPv4 address", sa)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
}

// KeepDead keeps addr, a loopback address whose listener the caller has
// just closed, dead for as long as t runs: a connection to it is refused,
// as a killed process's port refuses it, and no other test's server gets
// the port.
//
// Its holder is bound but never listens, like DeadAddr's, but with
// SO_REUSEADDR: the closed listener's connections linger in TIME_WAIT on
// the port, and without it the bind fails. The kernel still skips the port
// when it picks one for a bind of port 0, the way every test server here
// gets its port.
func KeepDead(t testing.TB, addr string) {
	t.Helper()
	release, err := testenv.HoldPort(addr, false)
	if err != nil {
		t.Fatalf("keep %s dead: %v (another server took the port as the listener closed)", addr, err)
	}
	t.Cleanup(release)
}
