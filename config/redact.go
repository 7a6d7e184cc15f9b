package config

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// redactedSecret stands in for a secret that is set. An unset secret stays
// empty, so that the log still tells the two apart. It is refused as a
// secret's value (checkSecret).
const redactedSecret = "REDACTED"

// These methods take values, not pointers, so that a Config or Redis
// printed or logged either way never shows the password.

// String returns the configuration as YAML, with redis.password and
// redis.sentinel.password redacted, and redis.tls.enabled true whenever the
// connection to Redis is encrypted (a rediss:// address turns TLS on too).
// The output loads back with Parse, passwords aside: Validate refuses the
// placeholder, so a printed configuration saved as a file needs its
// secrets given again (their EDGE_* variables) before an edge runs with it.
func (c Config) String() string {
	c.Redis = c.Redis.printed()
	out, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(out)
}

// LogValue logs the configuration as groups named like the YAML keys, with
// redis.password redacted, durations and sizes in their YAML form, and one
// attribute per operation ("svc-admin,svc-env-manager idempotent
// [read_only] rate_per_minute=10 quota=reserve_environment"; only the fields set).
func (c Config) LogValue() slog.Value {
	ops := make([]slog.Attr, 0, len(c.Operations))
	for _, op := range c.Operations {
		v := strings.Join(op.ServiceAccountRoles, ",")
		if op.Idempotent {
			v += " idempotent"
		}
		if op.ReadOnly {
			v += " read_only"
		}
		if op.RatePerMinute != 0 {
			v += " rate_per_minute=" + strconv.Itoa(op.RatePerMinute)
		}
		if op.ConcurrentStreams != 0 {
			v += " concurrent_streams=" + strconv.Itoa(op.ConcurrentStreams)
		}
		if op.Quota != "" {
			v += " quota=" + op.Quota
		}
		if op.Shadow {
			v += " shadow"
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
			duration("shutdown_grace", c.Listen.ShutdownGrace),
			slog.Group("client_address",
				slog.Bool("proxy_protocol", c.Listen.ClientAddress.ProxyProtocol),
				slog.String("header", c.Listen.ClientAddress.Header),
				slog.Any("trusted_proxies", c.Listen.ClientAddress.TrustedProxies),
				slog.Int("warn_subjects_per_address", c.Listen.ClientAddress.WarnSubjectsPerAddress)),
			duration("http2_idle_timeout", c.Listen.HTTP2IdleTimeout),
			slog.Int("max_connections_per_address", c.Listen.MaxConnectionsPerAddress),
			slog.Any("connection_bound_exempt", c.Listen.ConnectionBoundExempt),
			slog.Int("max_resets_per_connection", c.Listen.MaxResetsPerConnection),
			slog.Int("max_early_calls", c.Listen.MaxEarlyCalls),
			duration("max_early_call_hold", c.Listen.MaxEarlyCallHold),
			slog.Int("max_held_calls_per_subject", c.Listen.MaxHeldCallsPerSubject),
			slog.Int("max_calls_in_flight", c.Listen.MaxCallsInFlight)),
		slog.Group("admin",
			slog.String("addr", c.Admin.Addr)),
		slog.Group("upstream",
			slog.String("url", c.Upstream.URL),
			slog.Any("urls", c.Upstream.URLs),
			duration("dial_timeout", c.Upstream.DialTimeout),
			duration("resolve_interval", c.Upstream.ResolveInterval),
			duration("max_connection_age", c.Upstream.MaxConnectionAge),
			duration("eject_for", c.Upstream.EjectFor),
			slog.Group("health_check",
				duration("interval", c.Upstream.HealthCheck.Interval),
				duration("timeout", c.Upstream.HealthCheck.Timeout),
				slog.Int("unhealthy_threshold", c.Upstream.HealthCheck.UnhealthyThreshold),
				slog.Int("healthy_threshold", c.Upstream.HealthCheck.HealthyThreshold),
				slog.String("service", c.Upstream.HealthCheck.Service))),
		slog.Group("oidc",
			slog.String("issuer_url", c.OIDC.IssuerURL),
			slog.String("audience", c.OIDC.Audience),
			slog.Bool("allow_any_audience", c.OIDC.AllowAnyAudience),
			slog.Bool("azp_as_audience", c.OIDC.AzpAsAudience),
			duration("clock_skew", c.OIDC.ClockSkew),
			slog.Any("role_claims", c.OIDC.RoleClaims),
			slog.String("plan_claim", c.OIDC.PlanClaim),
			slog.Int("token_cache_size", c.OIDC.TokenCacheSize),
			duration("http_timeout", c.OIDC.HTTPTimeout),
			duration("key_refetch_interval", c.OIDC.KeyRefetchInterval),
			slog.Int("refused_token_cache_size", c.OIDC.RefusedTokenCacheSize),
			slog.Group("failure_limit",
				slog.Int("per_minute", c.OIDC.FailureLimit.PerMinute),
				slog.Int("burst", c.OIDC.FailureLimit.Burst))),
		slog.Group("requests",
			slog.String("max_body_bytes", c.Requests.MaxBodyBytes.String()),
			duration("max_unary_timeout", c.Requests.MaxUnaryTimeout),
			duration("max_stream_timeout", c.Requests.MaxStreamTimeout),
			duration("stream_write_timeout", c.Requests.StreamWriteTimeout)),
		slog.Attr{Key: "redis", Value: c.Redis.LogValue()},
		slog.Attr{Key: "limits", Value: c.Limits.LogValue()},
		slog.Attr{Key: "operations", Value: slog.GroupValue(ops...)},
		slog.Group("cors",
			slog.Any("allowed_origins", c.CORS.AllowedOrigins),
			duration("max_age", c.CORS.MaxAge),
			slog.Bool("allow_credentials", c.CORS.AllowCredentials),
			slog.Group("preflight_limit",
				slog.Int("per_minute", c.CORS.PreflightLimit.PerMinute),
				slog.Int("burst", c.CORS.PreflightLimit.Burst))),
		slog.Group("log",
			slog.String("format", c.Log.Format),
			slog.String("level", c.Log.Level),
			slog.Float64("sample_ok", c.Log.SampleOK),
			slog.String("buffer_bytes", c.Log.BufferBytes.String())),
	)
}

// LogValue logs the limits as groups named like the YAML keys, maps in the
// order of their keys. Nothing here is secret.
func (l Limits) LogValue() slog.Value {
	plans := make([]slog.Attr, 0, len(l.Plans))
	for _, name := range slices.Sorted(maps.Keys(l.Plans)) {
		p := l.Plans[name]
		plans = append(plans, slog.Group(name,
			slog.Int("requests_per_minute", p.RequestsPerMinute),
			slog.Any("requests_per_day", p.RequestsPerDay),
			slog.Int("burst", p.Burst),
			slog.Attr{Key: "quotas", Value: p.Quotas.logValue()},
			slog.Bool("shadow", p.Shadow)))
	}
	subjectPlans := make([]slog.Attr, 0, len(l.SubjectPlans))
	for _, subject := range slices.Sorted(maps.Keys(l.SubjectPlans)) {
		subjectPlans = append(subjectPlans, slog.String(subject, l.SubjectPlans[subject]))
	}
	subjectQuotas := make([]slog.Attr, 0, len(l.SubjectQuotas))
	for _, subject := range slices.Sorted(maps.Keys(l.SubjectQuotas)) {
		subjectQuotas = append(subjectQuotas, slog.Attr{Key: subject, Value: l.SubjectQuotas[subject].logValue()})
	}
	return slog.GroupValue(
		slog.String("default_plan", l.DefaultPlan),
		slog.Attr{Key: "plans", Value: slog.GroupValue(plans...)},
		slog.Attr{Key: "subject_plans", Value: slog.GroupValue(subjectPlans...)},
		slog.Attr{Key: "subject_quotas", Value: slog.GroupValue(subjectQuotas...)},
		duration("stream_lease", l.StreamLease),
		slog.Group("environment_size",
			slog.Float64("vcpus", l.EnvironmentSize.VCPUs),
			slog.Float64("memory_gb", l.EnvironmentSize.MemoryGB)),
		slog.String("on_redis_failure", string(l.OnRedisFailure)),
		slog.Float64("local_share", l.LocalShare))
}

func (q Quotas) logValue() slog.Value {
	return slog.GroupValue(
		slog.Any("concurrent_environments", q.ConcurrentEnvironments),
		slog.Any("environments_per_month", q.EnvironmentsPerMonth),
		slog.Any("vcpu_hours_per_month", q.VCPUHoursPerMonth),
		slog.Any("memory_gb_hours_per_month", q.MemoryGBHoursPerMonth))
}

// String describes the Redis settings with the password redacted.
func (r Redis) String() string {
	r = r.printed()
	return fmt.Sprintf("addr=%q cluster_addrs=%q sentinel.master_name=%q sentinel.addrs=%q sentinel.password=%q username=%q password=%q tls=%t timeout=%s",
		r.Addr, r.ClusterAddrs, r.Sentinel.MasterName, r.Sentinel.Addrs, r.Sentinel.Password, r.Username, r.Password, r.TLS.on(), r.Timeout)
}

// LogValue logs the Redis settings with the password redacted.
func (r Redis) LogValue() slog.Value {
	r = r.printed()
	return slog.GroupValue(
		slog.String("addr", r.Addr),
		slog.Any("cluster_addrs", r.ClusterAddrs),
		slog.String("username", r.Username),
		slog.String("password", r.Password),
		slog.Group("sentinel",
			slog.String("master_name", r.Sentinel.MasterName),
			slog.Any("addrs", r.Sentinel.Addrs),
			slog.String("username", r.Sentinel.Username),
			slog.String("password", r.Sentinel.Password)),
		slog.Group("tls",
			slog.Bool("enabled", r.TLS.Enabled),
			slog.String("ca_file", r.TLS.CAFile),
			slog.String("server_name", r.TLS.ServerName),
			slog.String("cert_file", r.TLS.CertFile),
			slog.String("key_file", r.TLS.KeyFile)),
		slog.String("key_prefix", r.KeyPrefix),
		duration("timeout", r.Timeout))
}

// printed is r as it is printed and logged: secrets redacted, and TLS
// shown as on whenever the edge will use it, so that what an operator reads
// says whether the connection is encrypted (a rediss:// address alone
// turns it on, with redis.tls.enabled left false).
func (r Redis) printed() Redis {
	if t, err := r.Target(); err == nil && t.TLS {
		r.TLS.Enabled = true
	}
	if r.Password != "" {
		r.Password = redactedSecret
	}
	if r.Sentinel.Password != "" {
		r.Sentinel.Password = redactedSecret
	}
	r.Addr = redactURL(r.Addr)
	r.ClusterAddrs = redactList(r.ClusterAddrs)
	r.Sentinel.Addrs = redactList(r.Sentinel.Addrs)
	return r
}

// redactList redacts credentials from addresses, in a copy: the
// configuration being printed keeps its own.
func redactList(addrs []string) []string {
	if addrs == nil {
		return nil
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = redactURL(a)
	}
	return out
}

// duration logs d as "30s" rather than as nanoseconds, which is how the
// JSON handler writes a time.Duration.
func duration(key string, d time.Duration) slog.Attr {
	return slog.String(key, d.String())
}
