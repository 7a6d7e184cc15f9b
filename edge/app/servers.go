package app

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/net/http2"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/conns"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/internal/certfile"
)

// resetsOf bounds the HTTP/2 streams a connection may reset
// (listen.max_resets_per_connection).
func resetsOf(c config.Listen, listener *observe.ListenerMetrics) conns.Resets {
	return conns.Resets{Max: c.MaxResetsPerConnection, OnClose: listener.ClosedForResets}
}

// newAPIServer is the API listener's server (listen) serving handler: its
// protocols, TLS certificate, connection bounds and timeouts.
func (a *App) newAPIServer(cfg *config.Config, handler http.Handler, clientAddr authn.ClientAddress, listener *observe.ListenerMetrics) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg.Listen.TLS.CertFile != "" {
		protocols.SetHTTP2(true) // ALPN h2
	} else {
		protocols.SetUnencryptedHTTP2(true) // h2c: gRPC without TLS
	}
	exempt := cfg.Listen.ConnectionBoundExempt
	if exempt == nil {
		exempt = cfg.Listen.ClientAddress.TrustedProxies
	}
	a.connBounds = conns.Options{PerAddress: cfg.Listen.MaxConnectionsPerAddress,
		ReadHeaderTimeout: cfg.Listen.ReadHeaderTimeout,
		OnRefused:         listener.RefusedAtAccept}
	if cfg.Listen.ClientAddress.ProxyProtocol {
		a.connBounds.ProxyProtocol = clientAddr.TrustedProxies
	}
	for _, e := range exempt {
		pfx, err := config.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("listen.connection_bound_exempt: %w", err)
		}
		a.connBounds.Exempt = append(a.connBounds.Exempt, pfx)
	}
	var apiTLS *tls.Config
	if cfg.Listen.TLS.CertFile != "" {
		pair, err := certfile.Load(cfg.Listen.TLS.CertFile, cfg.Listen.TLS.KeyFile)
		if err != nil {
			return fmt.Errorf("listen.tls: %w", err)
		}
		a.certs = append(a.certs, namedCert{"listen.tls", pair})
		// Read at each handshake: a rotated certificate is served to the
		// next connection (see reloadCerts), open ones keep theirs.
		apiTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	}
	a.api = &http.Server{
		TLSConfig:         apiTLS,
		Addr:              cfg.Listen.Addr,
		Handler:           handler,
		ConnContext:       conns.ConnContext,
		Protocols:         &protocols,
		ReadHeaderTimeout: cfg.Listen.ReadHeaderTimeout,
		IdleTimeout:       cfg.Listen.IdleTimeout,
		MaxHeaderBytes:    int(cfg.Listen.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		// No read or write timeout: streams are long. Every call has a
		// deadline of its own (requests.max_*_timeout).
	}
	// x/net's HTTP/2 server instead of net/http's copy of it: the same
	// code, but its idle timeout can be shorter than HTTP/1.1's. It runs
	// from a connection's start, so it also cuts one that never completes
	// a request's headers. x/net deprecates it for http.Server's settings,
	// but net/http's HTTP2Config has no idle timeout of HTTP/2's own (Go
	// 1.27's x/net still honors this one, wrapping net/http).
	//lint:ignore SA1019 no HTTP/2-only idle timeout in net/http (see above)
	h2 := &http2.Server{IdleTimeout: cfg.Listen.HTTP2IdleTimeout, CountError: listener.HTTP2Error}
	//lint:ignore SA1019 as above
	if err := http2.ConfigureServer(a.api, h2); err != nil {
		return fmt.Errorf("http2: %w", err)
	}
	return nil
}

// newAdminServer is the admin listener's server (admin): the probes,
// /metrics, the operator API and page.
func newAdminServer(c config.Admin, o admin.Options) *http.Server {
	return &http.Server{
		Addr:              c.Addr,
		Handler:           admin.New(o),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
	}
}
