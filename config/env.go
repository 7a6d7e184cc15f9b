package config

import "strings"

// envVar is one environment override: the variable, the YAML path of the
// field it sets, and how it sets it.
type envVar struct {
	name string
	path string
	set  func(c *Config, v string)
}

// envVars are the overrides, in the order ApplyEnv applies them.
var envVars = []envVar{
	{"EDGE_LISTEN_ADDR", "listen.addr", func(c *Config, v string) { c.Listen.Addr = v }},
	{"EDGE_TLS_CERT_FILE", "listen.tls.cert_file", func(c *Config, v string) { c.Listen.TLS.CertFile = v }},
	{"EDGE_TLS_KEY_FILE", "listen.tls.key_file", func(c *Config, v string) { c.Listen.TLS.KeyFile = v }},
	{"EDGE_PROXY_PROTOCOL", "listen.client_address.proxy_protocol", func(c *Config, v string) { c.Listen.ClientAddress.ProxyProtocol = v == "true" || v == "1" }},
	{"EDGE_CLIENT_ADDRESS_HEADER", "listen.client_address.header", func(c *Config, v string) { c.Listen.ClientAddress.Header = v }},
	{"EDGE_TRUSTED_PROXIES", "listen.client_address.trusted_proxies", func(c *Config, v string) { c.Listen.ClientAddress.TrustedProxies = splitList(v) }},
	{"EDGE_CONNECTION_BOUND_EXEMPT", "listen.connection_bound_exempt", func(c *Config, v string) { c.Listen.ConnectionBoundExempt = splitList(v) }},
	{"EDGE_ADMIN_ADDR", "admin.addr", func(c *Config, v string) { c.Admin.Addr = v }},
	{"EDGE_UPSTREAM_URL", "upstream.url", func(c *Config, v string) { c.Upstream.URL, c.Upstream.URLs = v, nil }},
	{"EDGE_UPSTREAM_ADMIN_URL", "upstream.admin_url", func(c *Config, v string) { c.Upstream.AdminURL = v }},
	{"EDGE_OIDC_ISSUER_URL", "oidc.issuer_url", func(c *Config, v string) { c.OIDC.IssuerURL = v }},
	{"EDGE_OIDC_AUDIENCE", "oidc.audience", func(c *Config, v string) { c.OIDC.Audience = v }},
	{"EDGE_REDIS_ADDR", "redis.addr", func(c *Config, v string) { c.Redis.Addr = v }},
	{"EDGE_REDIS_CLUSTER_ADDRS", "redis.cluster_addrs", func(c *Config, v string) { c.Redis.ClusterAddrs = splitList(v) }},
	{"EDGE_REDIS_USERNAME", "redis.username", func(c *Config, v string) { c.Redis.Username = v }},
	{"EDGE_REDIS_PASSWORD", "redis.password", func(c *Config, v string) { c.Redis.Password = v }},
	{"EDGE_REDIS_SENTINEL_MASTER", "redis.sentinel.master_name", func(c *Config, v string) { c.Redis.Sentinel.MasterName = v }},
	{"EDGE_REDIS_SENTINEL_ADDRS", "redis.sentinel.addrs", func(c *Config, v string) { c.Redis.Sentinel.Addrs = splitList(v) }},
	{"EDGE_REDIS_SENTINEL_USERNAME", "redis.sentinel.username", func(c *Config, v string) { c.Redis.Sentinel.Username = v }},
	{"EDGE_REDIS_SENTINEL_PASSWORD", "redis.sentinel.password", func(c *Config, v string) { c.Redis.Sentinel.Password = v }},
	{"EDGE_REDIS_TLS", "redis.tls.enabled", func(c *Config, v string) { c.Redis.TLS.Enabled = v == "true" || v == "1" }},
	{"EDGE_REDIS_TLS_CA_FILE", "redis.tls.ca_file", func(c *Config, v string) { c.Redis.TLS.CAFile = v }},
	{"EDGE_REDIS_TLS_SERVER_NAME", "redis.tls.server_name", func(c *Config, v string) { c.Redis.TLS.ServerName = v }},
	{"EDGE_REDIS_TLS_CERT_FILE", "redis.tls.cert_file", func(c *Config, v string) { c.Redis.TLS.CertFile = v }},
	{"EDGE_REDIS_TLS_KEY_FILE", "redis.tls.key_file", func(c *Config, v string) { c.Redis.TLS.KeyFile = v }},
	{"EDGE_ON_REDIS_FAILURE", "limits.on_redis_failure", func(c *Config, v string) { c.Limits.OnRedisFailure = FailureMode(v) }},
	{"EDGE_LOG_FORMAT", "log.format", func(c *Config, v string) { c.Log.Format = v }},
	{"EDGE_LOG_LEVEL", "log.level", func(c *Config, v string) { c.Log.Level = v }},
}

// ApplyEnv overrides fields with the environment variables named in the
// field comments, read through getenv (os.Getenv in Load; a map in tests).
// An empty variable counts as unset.
//
// redis.addr, redis.cluster_addrs and redis.sentinel.addrs are three ways
// to say where Redis is, so setting one of their variables alone clears the
// other two fields from the file. When several are set, the sentinels win
// over the cluster, which wins over addr (see Redis.Target).
func (c *Config) ApplyEnv(getenv func(string) string) {
	for _, e := range envVars {
		if v := getenv(e.name); v != "" {
			e.set(c, v)
		}
	}
	addr, cluster, sentinel := getenv("EDGE_REDIS_ADDR") != "", getenv("EDGE_REDIS_CLUSTER_ADDRS") != "", getenv("EDGE_REDIS_SENTINEL_ADDRS") != ""
	switch {
	case addr && !cluster && !sentinel:
		c.Redis.ClusterAddrs, c.Redis.Sentinel.Addrs = nil, nil
	case cluster && !addr && !sentinel:
		c.Redis.Addr, c.Redis.Sentinel.Addrs = "", nil
	case sentinel && !addr && !cluster:
		c.Redis.Addr, c.Redis.ClusterAddrs = "", nil
	}
}

// splitList splits a comma-separated list, dropping blanks around and
// between items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// envSources maps the YAML path of each field set from the environment to
// its variable, so that an error about it can say where the value came
// from.
func envSources(getenv func(string) string) map[string]string {
	m := make(map[string]string)
	for _, e := range envVars {
		if getenv(e.name) != "" {
			m[e.path] = e.name
		}
	}
	return m
}
