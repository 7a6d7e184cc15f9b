// Package certfile serves a TLS certificate read from a pair of PEM files
// and reads them again on request, so that a certificate rotated on disk
// (cert-manager replaces the files in place, often by swapping a symlink)
// is used from the next handshake on, without a restart and without
// touching connections already open.
//
// It does not watch the files itself: its owner calls Reload when it
// wants them checked (the edge does on its configuration poll and on
// SIGHUP).
package certfile

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Pair is a certificate and its key, from two PEM files.
type Pair struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]

	mu  sync.Mutex // serializes Reload
	sum []byte     // of the files' content last loaded
}

// Load reads the pair; it must load as a key pair.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	if _, err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload reads both files again. When their content changed and forms a
// key pair, the new certificate is served from the next handshake on and
// changed is true. Files that do not form a pair (the certificate replaced
// and the key not yet) leave the current certificate in place and return
// the error; the next Reload tries again.
func (p *Pair) Reload() (changed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	certPEM, err := os.ReadFile(p.certFile)
	if err != nil {
		return false, err
	}
	keyPEM, err := os.ReadFile(p.keyFile)
	if err != nil {
		return false, err
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write(keyPEM)
	sum := h.Sum(nil)
	if bytes.Equal(sum, p.sum) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("%s and %s: %w", p.certFile, p.keyFile, err)
	}
	p.current.Store(&cert)
	p.sum = sum
	return true, nil
}

// Certificate is the certificate served now.
func (p *Pair) Certificate() *tls.Certificate { return p.current.Load() }

// GetCertificate is for tls.Config.GetCertificate: a server's certificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.current.Load(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate: a client's
// certificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.current.Load(), nil
}
