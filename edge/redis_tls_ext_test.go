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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// testPKI is a CA and what it signed, as PEM files in one directory.
type testPKI struct {
	dir                   string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caFile                string
	serverCert, serverKey string // for DNS name "redis.test" only: no IP address
	clientCert, clientKey string
	otherCAFile           string // a CA that signed nothing here
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.ca, p.caKey, p.caFile = selfSignedCA(t, p.dir, "ca")
	_, _, p.otherCAFile = selfSignedCA(t, p.dir, "other-ca")
	p.serverCert, p.serverKey = p.issue(t, "server", &x509.Certificate{
		Subject: pkix.Name{CommonName: "redis.test"}, DNSNames: []string{"redis.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	p.clientCert, p.clientKey = p.issue(t, "client", &x509.Certificate{
		Subject: pkix.Name{CommonName: "edge"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return p
}

var serial int64

func nextSerial() *big.Int { serial++; return big.NewInt(time.Now().UnixNano() + serial) }

func selfSignedCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".crt")
	writePEM(t, file, "CERTIFICATE", der)
	return cert, key, file
}

func (p *testPKI) issue(t *testing.T, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	// redis-server may run as another user than the test only in odd
	// setups; 0644 keeps the files readable to it either way.
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	aclUser     = "edge"
	aclPassword = "edge-acl-password"
)

// startTLSRedis starts a redis-server that speaks only TLS, requires a
// client certificate from the CA, and knows one ACL user (the default user
// is off).
func startTLSRedis(t *testing.T, p *testPKI) *testenv.RedisProcess {
	t.Helper()
	clientTLS := &tls.Config{ServerName: "redis.test", RootCAs: x509.NewCertPool()}
	clientTLS.RootCAs.AddCert(p.ca)
	pair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS.Certificates = []tls.Certificate{pair}
	return testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
		Args: func(port int, dir string) []string {
			return []string{
				"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey, "--tls-ca-cert-file", p.caFile,
				"--tls-auth-clients", "yes",
				"--user", "default", "off",
				"--user", aclUser, "on", ">" + aclPassword, "~*", "&*", "+@all",
				"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
			}
		},
		Ping: func(ctx context.Context, addr string) error {
			c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: clientTLS, Username: aclUser, Password: aclPassword, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		},
	})
}

func TestEdgeUsesRedisOverTLSAsAnACLUser(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	rs := startTLSRedis(t, p)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	edgeWith := func(change func(r *config.Redis)) *testkit.Edge {
		cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
		cfg.Redis.Addr = "rediss://" + rs.Addr
		cfg.Redis.Username, cfg.Redis.Password = aclUser, aclPassword
		// The certificate names redis.test, not 127.0.0.1: server_name is needed.
		cfg.Redis.TLS = config.RedisTLS{CAFile: p.caFile, ServerName: "redis.test", CertFile: p.clientCert, KeyFile: p.clientKey}
		change(&cfg.Redis)
		// The plan refills once a minute: the counts below are Redis' exact
		// ones however slowly a busy machine makes the calls (at the default
		// rate a call more than 0.6 s after the last found one back).
		free := cfg.Limits.Plans["free"]
		free.RequestsPerMinute = 1
		cfg.Limits.Plans["free"] = free
		return testkit.StartEdge(t, cfg)
	}

	good := edgeWith(func(*config.Redis) {})
	tok := testkit.Token(t, iss.URL(), testenv.Unique("free-tls"))
	start := time.Now()
	for i := range 3 {
		res, body := jsonCall(t, good.URL, tok, listOrgs, "{}")
		wantFreePlanCount(t, res, body, i, start)
	}
	res, body := jsonCall(t, good.URL, tok, getUsage, "{}")
	if usage, _ := body["apiUsage"].(map[string]any); res.StatusCode != http.StatusOK || usage["requestsToday"] != float64(4) {
		t.Fatalf("GetUsage over TLS: %d %v, want 4 requests today", res.StatusCode, body)
	}
	if m := scrapeAdmin(t, good.AdminURL); !containsLine(m, "edge_fail_open_active 0") {
		t.Fatalf("the edge decided without Redis:\n%s", grepLines(m, "edge_fail_open_active", "edge_redis"))
	}

	// Each of these is refused by Redis or by the edge's own verification:
	// the calls are then decided without Redis (fail_open).
	for name, change := range map[string]func(r *config.Redis){
		"another CA":            func(r *config.Redis) { r.TLS.CAFile = p.otherCAFile },
		"another server name":   func(r *config.Redis) { r.TLS.ServerName = "other.test" },
		"no client certificate": func(r *config.Redis) { r.TLS.CertFile, r.TLS.KeyFile = "", "" },
		"wrong ACL password":    func(r *config.Redis) { r.Password = "wrong" },
	} {
		t.Run(name, func(t *testing.T) {
			e := edgeWith(change)
			tok := testkit.Token(t, iss.URL(), testenv.Unique("free-tls-bad"))
			if res, _ := jsonCall(t, e.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
				t.Fatalf("fail_open answered %d", res.StatusCode)
			}
			if m := scrapeAdmin(t, e.AdminURL); !containsLine(m, "edge_fail_open_active 1") && !strings.Contains(m, `edge_redis_errors_total{kind="error",op="evalsha",user="limits"} 1`) {
				t.Fatalf("the call did not fail to reach Redis:\n%s", grepLines(m, "edge_fail_open_active", "edge_redis"))
			}
		})
	}
}

func containsLine(text, line string) bool {
	for _, l := range splitLines(text) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
