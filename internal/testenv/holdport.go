package testenv

import (
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// HoldPort binds a socket that never listens to addr, a loopback port a
// server of the test had (or has): connections to it are refused, as to a
// server that is down, and the kernel gives the port to no bind of port 0,
// the way every test server here gets its port. A closed listener's port
// is free for the next such bind, and in a parallel run another test's
// server took it and answered in the place of the server that was down.
// release closes the socket.
//
// reusePort chooses who may still bind the port by its number:
//   - false: the holder has SO_REUSEADDR, as Go's listeners and
//     redis-server's do; it coexists with the connections a closed listener
//     left in TIME_WAIT, and such a server may listen on the port again
//     while it is held (then release it);
//   - true: the holder has SO_REUSEPORT alone; it may bind beside a live
//     listener that has SO_REUSEPORT too (then close that listener: the
//     port is never free), and only such a listener may bind it again.
func HoldPort(addr string, reusePort bool) (release func(), err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("hold %q: want an IPv4 address and port (%v)", addr, err)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hold %s: socket: %w", addr, err)
	}
	opt := syscall.SO_REUSEADDR
	if reusePort {
		opt = unix.SO_REUSEPORT
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, opt, 1); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("hold %s: setsockopt: %w", addr, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("hold %s: bind: %w", addr, err)
	}
	return func() { _ = syscall.Close(fd) }, nil
}
