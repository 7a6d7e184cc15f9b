package conns_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/conns"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// accepting runs l's accept loop, as an http.Server would, and hands
// over each connection it returns.
func accepting(t *testing.T, l net.Listener) <-chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(out)
				return
			}
			out <- c
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return out
}

func listen(t *testing.T, o conns.Options) (*conns.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := conns.Listen(ln, o)
	return l, accepting(t, l)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func next(t *testing.T, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// closedByServer reports whether the server closed c without a word.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func TestAnAddressPastItsConnectionsIsClosedUntilOneCloses(t *testing.T) {
	var refused atomic.Int64
	l, accepted := listen(t, conns.Options{PerAddress: 2, OnRefused: func() { refused.Add(1) }})
	dial(t, l.Addr().String())
	dial(t, l.Addr().String())
	first, _ := next(t, accepted), next(t, accepted)
	third := dial(t, l.Addr().String())
	if !closedByServer(t, third) {
		t.Fatal("a third connection of an address bounded to 2 was served")
	}
	if refused.Load() != 1 || l.Open(loopback) != 2 {
		t.Fatalf("OnRefused %d times, Open %d; want 1 and 2", refused.Load(), l.Open(loopback))
	}
	_ = first.Close()
	_ = first.Close() // twice: the place is given back once
	if l.Open(loopback) != 1 {
		t.Fatalf("Open %d after one closed (twice), want 1", l.Open(loopback))
	}
	fourth := dial(t, l.Addr().String())
	served := next(t, accepted)
	if _, err := fourth.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(served, make([]byte, 1)); err != nil {
		t.Fatalf("the connection after one closed is not served: %v", err)
	}
}

func TestAnExemptPeerIsNotBounded(t *testing.T) {
	l, accepted := listen(t, conns.Options{PerAddress: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for range 3 {
		dial(t, l.Addr().String())
		next(t, accepted)
	}
	if l.Open(loopback) != 0 {
		t.Fatalf("Open %d for an exempt peer, want 0 (not counted)", l.Open(loopback))
	}
}

func TestWithoutABoundEveryConnectionIsServed(t *testing.T) {
	l, accepted := listen(t, conns.Options{})
	for range 3 {
		dial(t, l.Addr().String())
		next(t, accepted)
	}
}

// proxied dials l as a trusted proxy would, naming client in a PROXY
// protocol v1 header, and returns the server's side after its first read.
func proxied(t *testing.T, l *conns.Listener, accepted <-chan net.Conn, client string) (net.Conn, error) {
	t.Helper()
	c := dial(t, l.Addr().String())
	if _, err := io.WriteString(c, "PROXY TCP4 "+client+" 10.0.0.1 40000 443\r\nx"); err != nil {
		t.Fatal(err)
	}
	s := next(t, accepted)
	_, err := io.ReadFull(s, make([]byte, 1))
	return s, err
}

func TestBehindATrustedProxyEachClientIsBoundedByTheAddressItsHeaderNames(t *testing.T) {
	l, accepted := listen(t, conns.Options{PerAddress: 1, ReadHeaderTimeout: 10 * time.Second,
		ProxyProtocol: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	s, err := proxied(t, l, accepted, "198.51.100.7")
	if err != nil {
		t.Fatalf("the first connection of 198.51.100.7: %v", err)
	}
	if got := s.RemoteAddr().String(); got != "198.51.100.7:40000" {
		t.Errorf("RemoteAddr %s, want the client the header names", got)
	}
	if _, err := proxied(t, l, accepted, "198.51.100.8"); err != nil {
		t.Fatalf("another client behind the same proxy: %v", err)
	}
	if _, err := proxied(t, l, accepted, "198.51.100.7"); err == nil {
		t.Fatal("a second connection of 198.51.100.7 (bounded to 1) was read")
	}
	if l.Open(netip.MustParseAddr("198.51.100.7")) != 1 || l.Open(loopback) != 0 {
		t.Fatalf("Open: client %d, proxy %d; want 1 and 0", l.Open(netip.MustParseAddr("198.51.100.7")), l.Open(loopback))
	}
	_ = s.Close()
	if _, err := proxied(t, l, accepted, "198.51.100.7"); err != nil {
		t.Fatalf("after its connection closed, 198.51.100.7 again: %v", err)
	}

	// The proxy's own connection (a health check, no header) is its own,
	// not bounded.
	for range 2 {
		c := dial(t, l.Addr().String())
		if _, err := io.WriteString(c, "GET"); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(next(t, accepted), make([]byte, 3)); err != nil {
			t.Fatalf("the proxy's own connection: %v", err)
		}
	}
}

// resetsServer serves h behind Resets over cleartext HTTP/2 and reports
// each request once Resets has counted it.
func resetsServer(t *testing.T, b conns.Resets, h http.Handler) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	counted := make(chan struct{}, 16)
	wrapped := b.Wrap(h)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wrapped.ServeHTTP(w, r)
		counted <- struct{}{}
	}))
	s.Config.ConnContext = conns.ConnContext
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s, counted
}

func h2c(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// slowUntilReset answers ?slow=1 only when its client gives up, others at once.
var slowUntilReset = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("slow") != "" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	_, _ = io.WriteString(w, "ok")
})

// reset sends a request and resets its stream once the answer has begun.
func reset(t *testing.T, c *http.Client, url string, counted <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?slow=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = res.Body.Close()
	wait(t, counted)
}

func finish(t *testing.T, c *http.Client, url string, counted <-chan struct{}) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	wait(t, counted)
}

func wait(t *testing.T, counted <-chan struct{}) {
	t.Helper()
	select {
	case <-counted:
	case <-time.After(30 * time.Second):
		t.Fatal("the request was not counted")
	}
}

func TestAConnectionThatResetsMostOfItsStreamsIsClosed(t *testing.T) {
	var closed atomic.Int64
	s, counted := resetsServer(t, conns.Resets{Max: 3, OnClose: func() { closed.Add(1) }}, slowUntilReset)
	c := h2c(t)
	for range 3 {
		reset(t, c, s.URL, counted)
	}
	if closed.Load() != 0 {
		t.Fatal("closed before its next stream")
	}
	finish(t, c, s.URL, counted)
	if closed.Load() != 1 {
		t.Fatalf("OnClose called %d times after 3 resets and no finished stream, want 1", closed.Load())
	}
	// A new connection starts afresh.
	finish(t, h2c(t), s.URL, counted)
	if closed.Load() != 1 {
		t.Fatalf("OnClose called %d times, want still 1", closed.Load())
	}
}

func TestAConnectionThatFinishesMostOfItsStreamsIsKept(t *testing.T) {
	var closed atomic.Int64
	s, counted := resetsServer(t, conns.Resets{Max: 2, OnClose: func() { closed.Add(1) }}, slowUntilReset)
	c := h2c(t)
	for range 3 {
		finish(t, c, s.URL, counted)
	}
	for range 2 {
		reset(t, c, s.URL, counted)
	}
	finish(t, c, s.URL, counted)
	if closed.Load() != 0 {
		t.Fatalf("a connection with 2 resets and 4 finished streams was closed")
	}
}

func TestHTTP1ResetsAreNotCounted(t *testing.T) {
	var closed atomic.Int64
	s, counted := resetsServer(t, conns.Resets{Max: 1, OnClose: func() { closed.Add(1) }}, slowUntilReset)
	c := &http.Client{Transport: &http.Transport{}}
	for range 3 {
		reset(t, c, s.URL, counted)
	}
	finish(t, c, s.URL, counted)
	if closed.Load() != 0 {
		t.Fatalf("HTTP/1.1 connections were counted as resetting")
	}
}
