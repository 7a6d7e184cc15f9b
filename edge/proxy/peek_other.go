//go:build !unix

package proxy

import "net"

// closedWhileIdle cannot peek here: a closed connection is found on use.
func closedWhileIdle(net.Conn) bool { return false }
