package devissuer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is an [Issuer] listening on its own socket.
type Server struct {
	// Issuer is the issuer the server serves, for RotateKey, Mint and the
	// like (as httptest.Server shows its parts).
	Issuer *Issuer
	srv    *http.Server
	served chan error // receives Serve's result once
}

// Start listens on addr (e.g. "127.0.0.1:0" in tests, "127.0.0.1:8081" in
// development mode) and serves an issuer for cfg over plain HTTP until Close or
// Shutdown. The base URL is "http://" + the listener's address; when addr has
// no host or an unspecified one (":8081", "0.0.0.0:8081"), the URL names
// 127.0.0.1 instead. To serve under another name, use [New] with your own
// http.Server.
func Start(addr string, cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devissuer: listen: %w", err)
	}
	iss, err := New("http://"+dialable(ln.Addr().(*net.TCPAddr)), cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s := &Server{
		Issuer: iss,
		srv: &http.Server{
			Handler:           iss,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    64 << 10,
		},
		served: make(chan error, 1),
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// dialable returns host:port for a URL that reaches the listener.
func dialable(a *net.TCPAddr) string {
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(a.Port))
}

// URL returns the issuer URL, e.g. "http://127.0.0.1:8081/realms/dev".
func (s *Server) URL() string { return s.Issuer.URL() }

// Close stops the server at once, closing open connections.
func (s *Server) Close() error {
	return s.wait(s.srv.Close())
}

// Shutdown stops the server gracefully: it stops accepting, lets requests in
// flight finish, and returns when they have or ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.wait(s.srv.Shutdown(ctx))
}

// wait returns once Serve has, so that no goroutine outlives the server.
func (s *Server) wait(stopErr error) error {
	if stopErr != nil {
		return fmt.Errorf("devissuer: stop server: %w", stopErr)
	}
	err, ok := <-s.served
	if !ok {
		return nil // stopped before
	}
	close(s.served)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("devissuer: serve: %w", err)
	}
	return nil
}
