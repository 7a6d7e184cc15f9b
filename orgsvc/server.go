package orgsvc

import (
	"net/http"
	"time"
)

// NewServer returns an http.Server for h that speaks HTTP/1.1 and cleartext
// HTTP/2 (gRPC without TLS), with timeouts that suit long-lived streams: no
// write timeout, bounded headers and idle connections.
func NewServer(addr string, h http.Handler) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
