package testkit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orgedge/edge/internal/testenv"
)

// FaultProxy is a TCP proxy in front of a server (a redis-server) that a
// test turns bad: it adds latency to every request, stalls (accepts and
// reads, never answers), or refuses connections, and back. Point the
// client under test at Addr.
type FaultProxy struct {
	Addr   string
	target string
	t      testing.TB

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	delay   time.Duration
	stalled bool
	ln      net.Listener // nil while refusing
	release func()       // while refusing, releases the port's holder (testenv.HoldPort)
	conns   map[net.Conn]struct{}
	closed  bool
}

// StartFaultProxy listens on a free loopback port and forwards to target
// until the test ends.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	p := &FaultProxy{target: target, t: t, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	ln, err := listenReusable("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.close)
	return p
}

// Delay holds every request for d before passing it on (0: none).
func (p *FaultProxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
	p.notify()
}

// Stall makes the server look hung: connections are accepted and requests
// read, but nothing is answered until Heal.
func (p *FaultProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
	p.notify()
}

// Retarget sends the connections made from now on to target (a loop: the
// proxy in front of a server that forwards to the proxy).
func (p *FaultProxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Refuse closes the listener and every connection: new connections are
// refused, as when the server is down, until Heal. The port stays the
// proxy's (testenv.HoldPort): a closed listener's port is free for the
// next bind of port 0, and in a parallel run another test's server took
// it, so that the "refused" backend answered as that server (a 401 from
// another test's edge, a health check passed by another test's backend).
func (p *FaultProxy) Refuse() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		release, err := testenv.HoldPort(p.Addr, true)
		if err != nil {
			p.t.Fatalf("fault proxy: %v", err)
		}
		p.release = release
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.notify()
}

// Heal ends every fault: no delay, answers flow, connections accepted.
func (p *FaultProxy) Heal() {
	p.t.Helper()
	p.mu.Lock()
	p.delay, p.stalled = 0, false
	p.notify()
	listening := p.ln != nil
	p.mu.Unlock()
	if listening {
		return
	}
	// The holder keeps the port until the listener has it again.
	ln, err := listenReusable(p.Addr)
	if err != nil {
		p.t.Fatalf("fault proxy: listen again on %s: %v", p.Addr, err)
	}
	p.mu.Lock()
	p.releaseHolder()
	p.mu.Unlock()
	p.serve(ln)
}

// releaseHolder closes the socket that held the port while refusing; p.mu
// is held.
func (p *FaultProxy) releaseHolder() {
	if p.release != nil {
		p.release()
		p.release = nil
	}
}

// listenReusable listens on addr with SO_REUSEPORT (and Go's
// SO_REUSEADDR), so that Refuse can hold the port while the listener still
// has it, and Heal listen on it again while it is held.
func listenReusable(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		return errors.Join(err, serr)
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}

func (p *FaultProxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *FaultProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c)
		}
	}()
}

func (p *FaultProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed || p.ln == nil {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *FaultProxy) handle(client net.Conn) {
	defer client.Close()
	if !p.track(client, true) {
		return
	}
	defer p.track(client, false)
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	server, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	if !p.track(server, true) {
		return
	}
	defer p.track(server, false)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, true); done <- struct{}{} }()
	go func() { p.pipe(client, server, false); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, applying the faults: requests (client to server)
// wait out the delay; answers (server to client) wait while stalled.
func (p *FaultProxy) pipe(dst, src net.Conn, requests bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(requests) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// wait applies the current faults to one chunk; false: drop the connection.
func (p *FaultProxy) wait(request bool) bool {
	for {
		p.mu.Lock()
		delay, stalled, changed, closed := p.delay, p.stalled, p.changed, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		switch {
		case request && delay > 0:
			select {
			case <-time.After(delay):
				return true
			case <-changed:
				continue // a new setting applies at once
			}
		case !request && stalled:
			<-changed
		default:
			return true
		}
	}
}

func (p *FaultProxy) close() {
	p.mu.Lock()
	p.closed = true
	ln := p.ln
	p.ln = nil
	p.releaseHolder()
	for c := range p.conns {
		_ = c.Close()
	}
	p.notify()
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}
