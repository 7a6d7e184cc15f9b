package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
)

func TestRedisTargetTakesTheSchemeOffAndChoosesTheDeployment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		redis config.Redis
		want  config.RedisTarget
	}{
		{"plain address", config.Redis{Addr: "r:6379"}, config.RedisTarget{Mode: config.ModeStandalone, Addrs: []string{"r:6379"}}},
		{"redis:// address", config.Redis{Addr: "redis://r:6379"}, config.RedisTarget{Mode: config.ModeStandalone, Addrs: []string{"r:6379"}}},
		{"rediss:// turns TLS on", config.Redis{Addr: "rediss://r:6380"}, config.RedisTarget{Mode: config.ModeStandalone, Addrs: []string{"r:6380"}, TLS: true}},
		{"tls.enabled turns TLS on", config.Redis{Addr: "r:6380", TLS: config.RedisTLS{Enabled: true}}, config.RedisTarget{Mode: config.ModeStandalone, Addrs: []string{"r:6380"}, TLS: true}},
		{"cluster over TLS", config.Redis{Addr: "ignored:1", ClusterAddrs: []string{"rediss://a:1", "rediss://b:2"}}, config.RedisTarget{Mode: config.ModeCluster, Addrs: []string{"a:1", "b:2"}, TLS: true}},
		{"sentinel wins", config.Redis{Addr: "ignored:1", ClusterAddrs: []string{"c:1"}, Sentinel: config.RedisSentinel{MasterName: "m", Addrs: []string{"s1:26379", "s2:26379"}}},
			config.RedisTarget{Mode: config.ModeSentinel, Addrs: []string{"s1:26379", "s2:26379"}}},
	}
	for _, tt := range tests {
		got, err := tt.redis.Target()
		if err != nil || got.Mode != tt.want.Mode || got.TLS != tt.want.TLS || !slices.Equal(got.Addrs, tt.want.Addrs) {
			t.Errorf("%s: Target() = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestRedisAddressesAndTLSAreValidated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "redis")
	tests := []struct {
		name string
		set  func(r *config.Redis)
		want string // "" when valid
	}{
		{"password in a URL is refused and not repeated", func(r *config.Redis) { r.Addr = "rediss://edge:s3cret@r:6380" },
			`redis: "rediss://REDACTED@r:6380": only host:port may follow rediss://`},
		{"password before an address without a scheme is refused and not repeated", func(r *config.Redis) { r.Addr = "s3cret@r:6379" },
			`redis: "REDACTED@r:6379": only host:port; set username and password`},
		{"the printed placeholder for a password", func(r *config.Redis) { r.Password = "REDACTED" },
			`redis.password: "REDACTED" is the placeholder ` + "`edge -check-config -print`" + ` writes for a secret, not the secret: set the real one, preferably in EDGE_REDIS_PASSWORD`},
		{"the printed placeholder for the sentinels' password", func(r *config.Redis) {
			r.Sentinel = config.RedisSentinel{MasterName: "m", Addrs: []string{"s:26379"}, Password: "REDACTED"}
		}, `redis.sentinel.password: "REDACTED" is the placeholder`},
		{"unknown scheme", func(r *config.Redis) { r.Addr = "http://r:6379" }, `redis: "http://r:6379": the scheme must be redis:// or rediss://`},
		{"mixed schemes", func(r *config.Redis) { r.ClusterAddrs = []string{"rediss://a:1", "b:2"} }, "redis: mixes rediss:// and plain addresses"},
		{"sentinel without master", func(r *config.Redis) { r.Sentinel.Addrs = []string{"s:26379"} }, "redis.sentinel.master_name: must be set"},
		{"sentinel address", func(r *config.Redis) { r.Sentinel = config.RedisSentinel{MasterName: "m", Addrs: []string{"s"}} }, `redis.sentinel.addrs[0]: "s" is not host:port`},
		{"missing CA file", func(r *config.Redis) { r.TLS.CAFile = dir + "/none.pem" }, "redis.tls: ca_file: open "},
		{"CA file without a certificate", func(r *config.Redis) { r.TLS.CAFile = key }, "redis.tls: ca_file: " + key + " holds no PEM certificate"},
		{"client cert without key", func(r *config.Redis) { r.TLS.CertFile = cert }, "redis.tls: cert_file and key_file: set both or neither"},
		{"CA and client certificate", func(r *config.Redis) {
			r.TLS = config.RedisTLS{CAFile: cert, CertFile: cert, KeyFile: key, ServerName: "redis"}
		}, ""},
		{"sentinel over TLS", func(r *config.Redis) {
			r.Sentinel = config.RedisSentinel{MasterName: "m", Addrs: []string{"rediss://s:26379"}, Password: "x"}
		}, ""},
	}
	for _, tt := range tests {
		c := valid()
		tt.set(&c.Redis)
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: Validate() = %v\nwant %s", tt.name, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error shows the password: %v", tt.name, err)
		}
	}
	c := valid()
	c.Redis.TLS = config.RedisTLS{CAFile: cert, CertFile: cert, KeyFile: key, ServerName: "redis"}
	tc, err := c.Redis.TLSConfig()
	if err != nil || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis" {
		t.Fatalf("TLSConfig() = %+v, %v", tc, err)
	}
	if tc, err := valid().Redis.TLSConfig(); tc != nil || err != nil {
		t.Fatalf("TLSConfig() without TLS = %+v, %v; want nil", tc, err)
	}
}

func TestRedisSentinelAndTLSFromTheEnvironment(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.Redis.ClusterAddrs = []string{"c:1"}
	c.ApplyEnv(getenv(map[string]string{
		"EDGE_REDIS_SENTINEL_MASTER":   "edge",
		"EDGE_REDIS_SENTINEL_ADDRS":    "s1:26379, s2:26379",
		"EDGE_REDIS_SENTINEL_PASSWORD": "sentinel-secret",
		"EDGE_REDIS_TLS":               "true",
		"EDGE_REDIS_TLS_SERVER_NAME":   "redis.internal",
	}))
	r := c.Redis
	if r.Addr != "" || r.ClusterAddrs != nil || r.Sentinel.MasterName != "edge" || !slices.Equal(r.Sentinel.Addrs, []string{"s1:26379", "s2:26379"}) ||
		r.Sentinel.Password != "sentinel-secret" || !r.TLS.Enabled || r.TLS.ServerName != "redis.internal" {
		t.Fatalf("after ApplyEnv: %+v", r)
	}
	for _, s := range []string{c.String(), r.String()} {
		if strings.Contains(s, "sentinel-secret") || !strings.Contains(s, "REDACTED") {
			t.Errorf("the sentinel password is not redacted:\n%s", s)
		}
	}
	// Setting the one address alone clears the sentinels from the file.
	c.ApplyEnv(getenv(map[string]string{"EDGE_REDIS_ADDR": "r:6379"}))
	if c.Redis.Sentinel.Addrs != nil || c.Redis.Addr != "r:6379" {
		t.Fatalf("EDGE_REDIS_ADDR alone: %+v", c.Redis)
	}
}
