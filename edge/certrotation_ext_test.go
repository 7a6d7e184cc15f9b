package edge_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
)

// newCertificate makes a self-signed certificate for 127.0.0.1 named cn,
// and its key, as PEM.
func newCertificate(t *testing.T, cn string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), cert
}

// secretVolume lays out files as Kubernetes mounts a Secret, which is how
// cert-manager's certificates arrive: tls.crt -> ..data/tls.crt, ..data ->
// a directory of this version. rotate swaps the ..data symlink at once.
type secretVolume struct {
	dir string
	n   int
}

func (v *secretVolume) rotate(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	v.n++
	version := filepath.Join(v.dir, "..version"+string(rune('0'+v.n)))
	if err := os.Mkdir(version, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(v.dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// servedName calls the edge over c and returns the status and the name of
// the certificate the connection was served.
func servedName(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	res, _ := jsonCallWith(t, c, nil, url, token, listOrgs, "{}")
	return res.StatusCode, res.TLS.PeerCertificates[0].Subject.CommonName
}

func TestARotatedCertificateIsServedToNewConnectionsWhileOpenOnesKeepWorking(t *testing.T) {
	t.Parallel()
	vol := &secretVolume{dir: t.TempDir()}
	certA, keyA, a := newCertificate(t, "edge-before")
	certB, keyB, b := newCertificate(t, "edge-after")
	vol.rotate(t, certA, keyA)
	s := startFromFile(t, func(c *config.Config) {
		c.Listen.TLS = config.TLS{CertFile: filepath.Join(vol.dir, "tls.crt"), KeyFile: filepath.Join(vol.dir, "tls.key")}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.edge.App.WatchConfig(ctx, s.path, 20*time.Millisecond, nil)

	roots := x509.NewCertPool()
	roots.AddCert(a)
	roots.AddCert(b)
	var dials atomic.Int32
	client := func() *http.Client {
		d := &net.Dialer{}
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, MaxConnsPerHost: 1,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return d.DialContext(ctx, network, addr)
			},
		}}
	}
	tok := s.token("free-tls-rotation")
	open := client()
	if code, name := servedName(t, open, s.edge.URL, tok); code != http.StatusOK || name != "edge-before" {
		t.Fatalf("before the rotation: %d, certificate %q", code, name)
	}

	// cert-manager renews: the Secret's files are swapped under the edge.
	vol.rotate(t, certB, keyB)
	testkit.WaitFor(t, "a new connection served the rotated certificate", func() bool {
		_, name := servedName(t, client(), s.edge.URL, tok)
		return name == "edge-after"
	})
	// The connection opened before the rotation is still up and serving.
	before := dials.Load()
	if code, name := servedName(t, open, s.edge.URL, tok); code != http.StatusOK || name != "edge-before" {
		t.Errorf("the open connection after the rotation: %d, certificate %q; want 200 on the same connection", code, name)
	}
	if dials.Load() != before {
		t.Errorf("the open connection was dropped: the client dialed again")
	}
	if !strings.Contains(s.log.String(), "tls certificate reloaded") {
		t.Errorf("no log line says the certificate was reloaded:\n%s", s.log.String())
	}
}
