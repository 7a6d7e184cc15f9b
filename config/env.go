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
	{"EDGE_ADMIN_ADDR", "admin.addr", func(c *Config, v string) { c.Admin.Addr = v }},
	{"EDGE_UPSTREAM_URL", "upstream.url", func(c *Config, v string) { c.Upstream.URL = v }},
	{"EDGE_OIDC_ISSUER_URL", "oidc.issuer_url", func(c *Config, v string) { c.OIDC.IssuerURL = v }},
	{"EDGE_OIDC_AUDIENCE", "oidc.audience", func(c *Config, v string) { c.OIDC.Audience = v }},
	{"EDGE_REDIS_ADDR", "redis.addr", func(c *Config, v string) { c.Redis.Addr = v }},
	{"EDGE_REDIS_CLUSTER_ADDRS", "redis.cluster_addrs", func(c *Config, v string) { c.Redis.ClusterAddrs = splitList(v) }},
	{"EDGE_REDIS_USERNAME", "redis.username", func(c *Config, v string) { c.Redis.Username = v }},
	{"EDGE_REDIS_PASSWORD", "redis.password", func(c *Config, v string) { c.Redis.Password = v }},
	{"EDGE_ON_REDIS_FAILURE", "limits.on_redis_failure", func(c *Config, v string) { c.Limits.OnRedisFailure = v }},
	{"EDGE_LOG_FORMAT", "log.format", func(c *Config, v string) { c.Log.Format = v }},
	{"EDGE_LOG_LEVEL", "log.level", func(c *Config, v string) { c.Log.Level = v }},
}

// ApplyEnv overrides fields with the environment variables named in the
// field comments, read through getenv (os.Getenv in Load; a map in tests).
// An empty variable counts as unset.
//
// redis.addr and redis.cluster_addrs are two ways to say where Redis is, so
// setting one variable clears the other field from the file; setting both
// variables is reported by Validate.
func (c *Config) ApplyEnv(getenv func(string) string) {
	for _, e := range envVars {
		if v := getenv(e.name); v != "" {
			e.set(c, v)
		}
	}
	addr, cluster := getenv("EDGE_REDIS_ADDR") != "", getenv("EDGE_REDIS_CLUSTER_ADDRS") != ""
	switch {
	case addr && !cluster:
		c.Redis.ClusterAddrs = nil
	case cluster && !addr:
		c.Redis.Addr = ""
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
