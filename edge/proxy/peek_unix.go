//go:build unix

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// closedWhileIdle reports whether the peer of an idle connection has closed
// it (or sent something unasked, which makes it unfit too), with one
// non-blocking peek that consumes nothing.
func closedWhileIdle(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0: // unasked data
			closed = true
		case err == nil: // end of stream
			closed = true
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default: // reset, or another error
			closed = true
		}
		return true // never wait
	})
	return closed
}
