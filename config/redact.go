package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// redactedSecret stands in for a secret that is set. An unset secret stays
// empty, so that the log still tells the two apart.
const redactedSecret = "REDACTED"

// These methods take values, not pointers, so that a Config or Redis
// printed or logged either way never shows the password.

// String returns the configuration as YAML, with redis.password redacted.
// The output loads back with Parse, password aside.
func (c Config) String() string {
	c.Redis = c.Redis.redacted()
	out, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(out)
}

// LogValue logs the configuration as groups named like the YAML keys, with
// redis.password redacted, durations and sizes in their YAML form, and one
// attribute per operation ("svc-admin,svc-env-manager idempotent").
func (c Config) LogValue() slog.Value {
	ops := make([]slog.Attr, 0, len(c.Operations))
	for _, op := range c.Operations {
		v := strings.Join(op.ServiceAccountRoles, ",")
		if op.Idempotent {
			v += " idempotent"
		}
		ops = append(ops, slog.String(op.Procedure, v))
	}
	return slog.GroupValue(
		slog.Group("listen",
			slog.String("addr", c.Listen.Addr),
			slog.Group("tls",
				slog.String("cert_file", c.Listen.TLS.CertFile),
				slog.String("key_file", c.Listen.TLS.KeyFile)),
			duration("read_header_timeout", c.Listen.ReadHeaderTimeout),
			duration("idle_timeout", c.Listen.IdleTimeout),
			slog.String("max_header_bytes", c.Listen.MaxHeaderBytes.String()),
			duration("shutdown_grace", c.Listen.ShutdownGrace)),
		slog.Group("admin",
			slog.String("addr", c.Admin.Addr)),
		slog.Group("upstream",
			slog.String("url", c.Upstream.URL),
			duration("dial_timeout", c.Upstream.DialTimeout)),
		slog.Group("oidc",
			slog.String("issuer_url", c.OIDC.IssuerURL),
			slog.String("audience", c.OIDC.Audience),
			duration("clock_skew", c.OIDC.ClockSkew),
			slog.Any("role_claims", c.OIDC.RoleClaims),
			slog.String("plan_claim", c.OIDC.PlanClaim),
			slog.Int("token_cache_size", c.OIDC.TokenCacheSize),
			duration("http_timeout", c.OIDC.HTTPTimeout)),
		slog.Group("requests",
			slog.String("max_body_bytes", c.Requests.MaxBodyBytes.String()),
			duration("max_unary_timeout", c.Requests.MaxUnaryTimeout),
			duration("max_stream_timeout", c.Requests.MaxStreamTimeout)),
		slog.Attr{Key: "redis", Value: c.Redis.LogValue()},
		slog.Attr{Key: "operations", Value: slog.GroupValue(ops...)},
		slog.Group("log",
			slog.String("format", c.Log.Format),
			slog.String("level", c.Log.Level)),
	)
}

// String describes the Redis settings with the password redacted.
func (r Redis) String() string {
	r = r.redacted()
	return fmt.Sprintf("addr=%q cluster_addrs=%q username=%q password=%q timeout=%s",
		r.Addr, r.ClusterAddrs, r.Username, r.Password, r.Timeout)
}

// LogValue logs the Redis settings with the password redacted.
func (r Redis) LogValue() slog.Value {
	r = r.redacted()
	return slog.GroupValue(
		slog.String("addr", r.Addr),
		slog.Any("cluster_addrs", r.ClusterAddrs),
		slog.String("username", r.Username),
		slog.String("password", r.Password),
		duration("timeout", r.Timeout))
}

func (r Redis) redacted() Redis {
	if r.Password != "" {
		r.Password = redactedSecret
	}
	return r
}

// duration logs d as "30s" rather than as nanoseconds, which is how the
// JSON handler writes a time.Duration.
func duration(key string, d time.Duration) slog.Attr {
	return slog.String(key, d.String())
}
