package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Redis deployments the edge can use, as RedisTarget.Mode says.
const (
	ModeStandalone = "standalone"
	ModeCluster    = "cluster"
	ModeSentinel   = "sentinel"
)

// RedisTarget is where the edge's Redis is, with the schemes taken off the
// addresses: what a client needs to connect.
type RedisTarget struct {
	Mode  string   // ModeStandalone, ModeCluster or ModeSentinel
	Addrs []string // host:port: the server, the cluster's seeds or the sentinels
	TLS   bool     // a rediss:// address or redis.tls asks for TLS
}

// Target says where Redis is: the sentinels when redis.sentinel.addrs is
// set, else the cluster when redis.cluster_addrs is, else redis.addr.
func (r Redis) Target() (RedisTarget, error) {
	t := RedisTarget{Mode: ModeStandalone}
	raw := []string{r.Addr}
	switch {
	case len(r.Sentinel.Addrs) > 0:
		t.Mode, raw = ModeSentinel, r.Sentinel.Addrs
	case len(r.ClusterAddrs) > 0:
		t.Mode, raw = ModeCluster, r.ClusterAddrs
	case r.Addr == "":
		return t, errors.New("set addr, cluster_addrs or sentinel.addrs (EDGE_REDIS_ADDR, …): the edge keeps its limits, quotas and idempotency keys in the Redis its replicas share; " +
			"for a Redis on this machine alone, name it (addr: 127.0.0.1:6379): limits then hold per replica")
	}
	schemes := map[bool]int{}
	for _, a := range raw {
		hostPort, secure, err := splitRedisAddr(a)
		if err != nil {
			return t, err
		}
		schemes[secure]++
		t.Addrs = append(t.Addrs, hostPort)
	}
	if len(schemes) > 1 {
		return t, errors.New("mixes rediss:// and plain addresses: use one or the other")
	}
	t.TLS = schemes[true] > 0 || r.TLS.on()
	return t, nil
}

// splitRedisAddr takes redis:// or rediss:// off an address. A URL may
// carry nothing but host and port: credentials belong in username and
// password (and the password in its variable), where they are redacted.
func splitRedisAddr(a string) (hostPort string, secure bool, err error) {
	scheme, rest, ok := strings.Cut(a, "://")
	if !ok {
		// "pass@host:6379" would dial a host named "pass@host", and is
		// printed as "REDACTED@host:6379".
		if strings.Contains(a, "@") {
			return "", false, fmt.Errorf("%q: only host:port; set username and password (EDGE_REDIS_PASSWORD) instead", redactURL(a))
		}
		return a, false, nil
	}
	switch scheme {
	case "redis":
	case "rediss":
		secure = true
	default:
		return "", false, fmt.Errorf("%q: the scheme must be redis:// or rediss://", redactURL(a))
	}
	if strings.ContainsAny(rest, "@/?#") {
		return "", false, fmt.Errorf("%q: only host:port may follow %s://; set username and password (EDGE_REDIS_PASSWORD) instead", redactURL(a), scheme)
	}
	return rest, secure, nil
}

// redactURL hides what stands before an @, in case it is a password.
func redactURL(a string) string {
	if i := strings.LastIndex(a, "@"); i >= 0 {
		if j := strings.Index(a, "://"); j >= 0 && j < i {
			return a[:j+3] + redactedSecret + a[i:]
		}
		return redactedSecret + a[i:]
	}
	return a
}

func (t RedisTLS) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != ""
}

// TLSConfig returns the client TLS configuration for Redis, or nil when the
// connection is not encrypted. It reads the CA and certificate files.
func (r Redis) TLSConfig() (*tls.Config, error) {
	t, err := r.Target()
	if err != nil || !t.TLS {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLS.ServerName}
	if r.TLS.CAFile != "" {
		pem, err := os.ReadFile(r.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", r.TLS.CAFile)
		}
	}
	switch {
	case r.TLS.CertFile != "" && r.TLS.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(r.TLS.CertFile, r.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file and key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	case r.TLS.CertFile != "" || r.TLS.KeyFile != "":
		return nil, errors.New("cert_file and key_file: set both or neither")
	}
	return c, nil
}
