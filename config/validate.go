package config

import (
	"crypto/tls"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds the edge relies on.
const (
	maxClockSkew    = 5 * time.Minute
	maxRedisTimeout = 10 * time.Second
	// maxRedisPoolTimeout and maxRedisPoolSize keep a typo from making a
	// call wait minutes for a connection, or from opening a Redis's
	// connection limit's worth of them.
	maxRedisPoolTimeout = 30 * time.Second
	maxRedisPoolSize    = 10000
	minBodyBytes        = 1 * KiB
	minHeaderBytes      = 1 * KiB
	minStreamLease      = 3 * time.Second
	maxStreamLease      = 10 * time.Minute
)

// planName is what a plan may be called: a lowercase identifier, since a
// token's plan claim is lowercased before it is looked up.
var planName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Validate checks the whole configuration and reports every problem, each
// naming its field by YAML path ("upstream.url: …"), in the order of the
// fields. Validate reads the TLS files, if any, to check that they form a key pair.
func (c *Config) Validate() error {
	var p problems

	checkListenAddr(&p, "listen.addr", c.Listen.Addr)
	checkTLS(&p, c.Listen.TLS)
	checkPositive(&p, "listen.read_header_timeout", c.Listen.ReadHeaderTimeout)
	checkPositive(&p, "listen.idle_timeout", c.Listen.IdleTimeout)
	checkMinSize(&p, "listen.max_header_bytes", c.Listen.MaxHeaderBytes, minHeaderBytes)
	checkPositive(&p, "listen.shutdown_grace", c.Listen.ShutdownGrace)
	checkClientAddress(&p, "listen.client_address", c.Listen.ClientAddress)
	checkPositive(&p, "listen.http2_idle_timeout", c.Listen.HTTP2IdleTimeout)
	checkNotNegative(&p, "listen.max_connections_per_address", c.Listen.MaxConnectionsPerAddress)
	checkNotNegative(&p, "listen.max_resets_per_connection", c.Listen.MaxResetsPerConnection)
	checkNotNegative(&p, "listen.max_early_calls", c.Listen.MaxEarlyCalls)
	checkPositive(&p, "listen.max_early_call_hold", c.Listen.MaxEarlyCallHold)
	checkNotNegative(&p, "listen.max_held_calls_per_subject", c.Listen.MaxHeldCallsPerSubject)
	checkNotNegative(&p, "listen.max_calls_in_flight", c.Listen.MaxCallsInFlight)
	for i, e := range c.Listen.ConnectionBoundExempt {
		if _, err := ParsePrefix(e); err != nil {
			p.add(fmt.Sprintf("listen.connection_bound_exempt[%d]", i), "%q is not an IP address or CIDR prefix", e)
		}
	}

	checkListenAddr(&p, "admin.addr", c.Admin.Addr)
	if c.Admin.Addr == c.Listen.Addr && !strings.HasSuffix(c.Admin.Addr, ":0") && c.Admin.Addr != "" {
		p.add("admin.addr", "must differ from listen.addr")
	}

	if len(c.Upstream.URLs) == 0 {
		checkUpstreamURL(&p, "upstream.url", c.Upstream.URL)
	}
	for i, u := range c.Upstream.URLs {
		checkUpstreamURL(&p, fmt.Sprintf("upstream.urls[%d]", i), u)
	}
	checkPositive(&p, "upstream.dial_timeout", c.Upstream.DialTimeout)
	if c.Upstream.AdminURL != "" {
		checkUpstreamURL(&p, "upstream.admin_url", c.Upstream.AdminURL)
	}
	checkPositive(&p, "upstream.eject_for", c.Upstream.EjectFor)
	if c.Upstream.ResolveInterval < 0 {
		p.add("upstream.resolve_interval", "must be 0 (never) or positive, not %s", c.Upstream.ResolveInterval)
	}
	if c.Upstream.MaxConnectionAge < 0 {
		p.add("upstream.max_connection_age", "must be 0 (never) or positive, not %s", c.Upstream.MaxConnectionAge)
	}
	checkHealthCheck(&p, c.Upstream.HealthCheck)

	checkIssuerURL(&p, "oidc.issuer_url", c.OIDC.IssuerURL)
	switch {
	case c.OIDC.Audience == "" && !c.OIDC.AllowAnyAudience:
		p.add("oidc.audience", "must be set, as the API's client id at the issuer, which every access token must name in aud "+
			"(or set oidc.allow_any_audience: true to accept tokens minted for any client of the issuer, for development only)")
	case c.OIDC.Audience != "" && c.OIDC.AllowAnyAudience:
		p.add("oidc.allow_any_audience", "must be false when oidc.audience is set")
	}
	if c.OIDC.AzpAsAudience && c.OIDC.Audience == "" {
		p.add("oidc.azp_as_audience", "needs oidc.audience")
	}
	if c.OIDC.ClockSkew < 0 || c.OIDC.ClockSkew > maxClockSkew {
		p.add("oidc.clock_skew", "must be between 0s and %s, not %s", maxClockSkew, c.OIDC.ClockSkew)
	}
	checkRoleClaims(&p, "oidc.role_claims", c.OIDC.RoleClaims)
	if c.OIDC.PlanClaim == "" {
		p.add("oidc.plan_claim", "must be set")
	}
	if c.OIDC.TokenCacheSize < 1 {
		p.add("oidc.token_cache_size", "must be at least 1, not %d", c.OIDC.TokenCacheSize)
	}
	checkPositive(&p, "oidc.http_timeout", c.OIDC.HTTPTimeout)
	checkPositive(&p, "oidc.key_refetch_interval", c.OIDC.KeyRefetchInterval)
	if c.OIDC.RefusedTokenCacheSize < 0 {
		p.add("oidc.refused_token_cache_size", "must be 0 (off) or more, not %d", c.OIDC.RefusedTokenCacheSize)
	}
	switch fl := c.OIDC.FailureLimit; {
	case fl.PerMinute < 0:
		p.add("oidc.failure_limit.per_minute", "must be 0 (off) or more, not %d", fl.PerMinute)
	case fl.PerMinute > 0 && fl.Burst < 1:
		p.add("oidc.failure_limit.burst", "must be at least 1, not %d", fl.Burst)
	}

	checkMinSize(&p, "requests.max_body_bytes", c.Requests.MaxBodyBytes, minBodyBytes)
	checkPositive(&p, "requests.max_unary_timeout", c.Requests.MaxUnaryTimeout)
	checkPositive(&p, "requests.max_stream_timeout", c.Requests.MaxStreamTimeout)
	checkPositive(&p, "requests.stream_write_timeout", c.Requests.StreamWriteTimeout)
	checkPositive(&p, "requests.body_timeout", c.Requests.BodyTimeout)
	checkPositive(&p, "requests.stream_message_timeout", c.Requests.StreamMessageTimeout)

	checkRedis(&p, c.Redis)
	checkLimits(&p, c.Limits)
	checkIdempotency(&p, c.Idempotency)
	checkOperations(&p, c.Operations)
	checkCORS(&p, c.CORS)

	switch c.Log.Format {
	case "json", "text":
	default:
		p.add("log.format", "must be json or text, not %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	checkNotNegative(&p, "log.canceled_per_second", c.Log.CanceledPerSecond)
	if !(c.Log.SampleOK >= 0 && c.Log.SampleOK <= 1) {
		p.add("log.sample_ok", "must be between 0 and 1, not %v", c.Log.SampleOK)
	}
	if c.Log.BufferBytes < 4*KiB {
		p.add("log.buffer_bytes", "must be at least 4KiB, not %s", c.Log.BufferBytes)
	}
	return p.err()
}

func checkPositive(p *problems, path string, d time.Duration) {
	if d <= 0 {
		p.add(path, "must be positive, not %s", d)
	}
}

func checkNotNegative(p *problems, path string, n int) {
	if n < 0 {
		p.add(path, "must not be negative, not %d", n)
	}
}

func checkMinSize(p *problems, path string, n, least ByteSize) {
	if n < least {
		p.add(path, "must be at least %s, not %s", least, n)
	}
}

// checkListenAddr accepts host:port with an empty host (every interface)
// and port 0 (any free port, for tests).
func checkListenAddr(p *problems, path, addr string) {
	checkAddr(p, path, addr, 0, false)
}

// checkDialAddr accepts host:port with a host and a port from 1.
func checkDialAddr(p *problems, path, addr string) {
	checkAddr(p, path, addr, 1, true)
}

func checkAddr(p *problems, path, addr string, minPort int, needHost bool) {
	if addr == "" {
		p.add(path, "must be set, as host:port")
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(path, "%q is not host:port", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		p.add(path, "%q: port must be a number from %d to 65535", addr, minPort)
		return
	}
	if needHost && host == "" {
		p.add(path, "%q: needs a host", addr)
	}
}

func checkTLS(p *problems, t TLS) {
	switch {
	case t.CertFile == "" && t.KeyFile == "":
		return
	case t.CertFile == "":
		p.add("listen.tls.cert_file", "must be set when listen.tls.key_file is")
		return
	case t.KeyFile == "":
		p.add("listen.tls.key_file", "must be set when listen.tls.cert_file is")
		return
	}
	certOK := checkFile(p, "listen.tls.cert_file", t.CertFile)
	keyOK := checkFile(p, "listen.tls.key_file", t.KeyFile)
	if !certOK || !keyOK {
		return
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		p.add("listen.tls", "cert_file and key_file do not load as a key pair: %v", err)
	}
}

func checkFile(p *problems, path, name string) bool {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		p.add(path, "%v", err)
		return false
	case !fi.Mode().IsRegular():
		p.add(path, "%s is not a regular file", name)
		return false
	}
	return true
}

// checkUpstreamURL accepts http://host[:port][/]: the edge forwards each
// call's own path, and speaks cleartext HTTP/2 (h2c) to the backend.
func checkUpstreamURL(p *problems, path, raw string) {
	const want = "must be an http:// URL with a host"
	if raw == "" {
		p.add(path, "must be set, as http://host:port")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.add(path, "%s: %v", want, urlCause(err))
		return
	}
	switch {
	case u.Scheme == "https":
		p.add(path, "TLS to the backend is not supported yet: the edge speaks cleartext HTTP/2 (h2c) to it; use http://host:port")
		return
	case u.Scheme != "http" || u.Host == "" || u.Hostname() == "":
		p.add(path, "%s", want)
		return
	}
	checkURLRest(p, path, u)
	if u.Path != "" && u.Path != "/" {
		p.add(path, "must not have a path (%q): the edge forwards each call's /svc.v1.<Service>/<Method> as is", u.Path)
	}
}

// checkIssuerURL accepts an absolute http(s) URL with a host; go-oidc then
// checks that discovery names the same issuer.
func checkIssuerURL(p *problems, path, raw string) {
	const want = "must be an absolute http:// or https:// URL with a host"
	if raw == "" {
		p.add(path, "must be set, as the issuer's URL")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.add(path, "%s: %v", want, urlCause(err))
		return
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		p.add(path, "%s", want)
		return
	}
	checkURLRest(p, path, u)
}

func checkURLRest(p *problems, path string, u *url.URL) {
	if u.User != nil {
		p.add(path, "must not carry credentials")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			p.add(path, "port must be a number from 1 to 65535")
		}
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		p.add(path, "must not have a query or fragment")
	}
}

// urlCause unwraps a *url.Error to its cause: the url.Error repeats the whole
// URL, which the message quotes already or should not (credentials).
func urlCause(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkClientAddress accepts no proxy, or a header or the PROXY protocol
// with the proxies trusted to send them.
func checkClientAddress(p *problems, path string, c ClientAddress) {
	switch {
	case c.Header == "" && !c.ProxyProtocol && len(c.TrustedProxies) > 0:
		p.add(path+".trusted_proxies", "set header or proxy_protocol too: trusted proxies name the client one of these two ways")
	case c.Header != "" && len(c.TrustedProxies) == 0:
		p.add(path+".trusted_proxies", "must list the proxies that set %s: any other peer could forge it", c.Header)
	case c.ProxyProtocol && len(c.TrustedProxies) == 0:
		p.add(path+".trusted_proxies", "must list the proxies that send the PROXY protocol: any other peer could forge it")
	}
	if c.Header != "" && !validHeaderName(c.Header) {
		p.add(path+".header", "%q is not a header name", c.Header)
	}
	for i, tp := range c.TrustedProxies {
		if _, err := ParsePrefix(tp); err != nil {
			p.add(fmt.Sprintf("%s.trusted_proxies[%d]", path, i), "%q is not an IP address or CIDR prefix", tp)
		}
	}
	checkNotNegative(p, path+".warn_subjects_per_address", c.WarnSubjectsPerAddress)
}

// ParsePrefix reads an IP address (a prefix of its full length) or a CIDR
// prefix, as in listen.client_address.trusted_proxies.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		return pfx.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func validHeaderName(h string) bool {
	for _, r := range h {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return h != ""
}

func checkRoleClaims(p *problems, path string, claims []string) {
	if len(claims) == 0 {
		p.add(path, "must name at least one claim path")
		return
	}
	for i, c := range claims {
		if c == "" || slices.Contains(strings.Split(c, "."), "") {
			p.add(fmt.Sprintf("%s[%d]", path, i), "%q is not a dotted claim path such as realm_access.roles", c)
		}
	}
}

func checkRedis(p *problems, r Redis) {
	checkSecret(p, "redis.password", "EDGE_REDIS_PASSWORD", r.Password)
	checkSecret(p, "redis.sentinel.password", "EDGE_REDIS_SENTINEL_PASSWORD", r.Sentinel.Password)
	t, err := r.Target()
	if err != nil {
		p.add("redis", "%v", err)
	} else {
		path := map[string]string{ModeStandalone: "redis.addr", ModeCluster: "redis.cluster_addrs", ModeSentinel: "redis.sentinel.addrs"}[t.Mode]
		for i, a := range t.Addrs {
			if t.Mode == ModeStandalone {
				checkDialAddr(p, path, a)
			} else {
				checkDialAddr(p, fmt.Sprintf("%s[%d]", path, i), a)
			}
		}
		if t.Mode == ModeSentinel && r.Sentinel.MasterName == "" {
			p.add("redis.sentinel.master_name", "must be set with redis.sentinel.addrs: the name the sentinels know the master by")
		}
		if _, err := r.TLSConfig(); err != nil {
			p.add("redis.tls", "%v", err)
		}
	}
	if strings.ContainsAny(r.KeyPrefix, "{}") || len(r.KeyPrefix) > 64 {
		p.add("redis.key_prefix", "must be at most 64 characters without braces (they would break the keys' cluster hash tags)")
	}
	if r.Timeout <= 0 || r.Timeout > maxRedisTimeout {
		p.add("redis.timeout", "must be positive and at most %s, not %s", maxRedisTimeout, r.Timeout)
	}
	if r.PoolTimeout <= 0 || r.PoolTimeout > maxRedisPoolTimeout {
		p.add("redis.pool_timeout", "must be positive and at most %s, not %s", maxRedisPoolTimeout, r.PoolTimeout)
	}
	if r.PoolSize < 1 || r.PoolSize > maxRedisPoolSize {
		p.add("redis.pool_size", "must be 1 to %d, not %d", maxRedisPoolSize, r.PoolSize)
	}
	if r.MinIdleConns < 0 || r.MinIdleConns > r.PoolSize {
		p.add("redis.min_idle_conns", "must be 0 to pool_size (%d), not %d", r.PoolSize, r.MinIdleConns)
	}
}

// checkSecret refuses the placeholder that the printed configuration
// (String, `edge -check-config -print`) holds in place of a secret: a file
// saved from that output loads otherwise, and an edge started from it
// would send the placeholder as the password and fail every Redis call.
func checkSecret(p *problems, path, variable, v string) {
	if v == redactedSecret {
		p.add(path, "%q is the placeholder `edge -check-config -print` writes for a secret, not the secret: set the real one, preferably in %s", v, variable)
	}
}

// checkHealthCheck checks upstream.health_check when checks are on.
func checkHealthCheck(p *problems, h HealthCheck) {
	switch {
	case h.Interval < 0:
		p.add("upstream.health_check.interval", "must be 0 (no checks) or positive, not %s", h.Interval)
	case h.Interval > 0:
		checkPositive(p, "upstream.health_check.timeout", h.Timeout)
		if h.Timeout > h.Interval {
			p.add("upstream.health_check.timeout", "must be at most upstream.health_check.interval (%s), not %s", h.Interval, h.Timeout)
		}
		if h.UnhealthyThreshold < 1 {
			p.add("upstream.health_check.unhealthy_threshold", "must be at least 1, not %d", h.UnhealthyThreshold)
		}
		if h.HealthyThreshold < 1 {
			p.add("upstream.health_check.healthy_threshold", "must be at least 1, not %d", h.HealthyThreshold)
		}
	}
}

// checkOperations requires one valid row per procedure of the API, so that a
// table that lost a row cannot silently open or close an operation.
func checkOperations(p *problems, ops []Operation) {
	if len(ops) == 0 {
		p.add("operations", "empty: list a row for every procedure, or omit operations to use the default table")
		return
	}
	seen := make(map[string]int, len(ops))
	for i, op := range ops {
		base := fmt.Sprintf("operations[%d]", i)
		info, known := LookupProcedure(op.Procedure)
		switch j, dup := seen[op.Procedure]; {
		case op.Procedure == "":
			p.add(base+".procedure", "must be set")
		case !known:
			p.add(base+".procedure", "unknown procedure %q", op.Procedure)
		case dup:
			p.add(base+".procedure", "%q is listed already, as operations[%d]", op.Procedure, j)
		default:
			seen[op.Procedure] = i
		}
		if len(op.ServiceAccountRoles) == 0 {
			p.add(base+".service_account_roles", "must name at least one role")
		}
		for j, r := range op.ServiceAccountRoles {
			if rest, ok := strings.CutPrefix(r, "svc-"); !ok || rest == "" {
				p.add(fmt.Sprintf("%s.service_account_roles[%d]", base, j), "%q is not a service-account role: it must start with \"svc-\"", r)
			}
		}
		if op.Idempotent && known && info.Streaming() {
			p.add(base+".idempotent", "%q is a streaming procedure; Idempotency-Key applies to unary calls only", op.Procedure)
		}
		if op.ReadOnly && known && !info.NoSideEffects {
			p.add(base+".read_only", "%q has side effects (the API does not declare it NO_SIDE_EFFECTS): a call of it is never sent twice", op.Procedure)
		}
		if op.RatePerMinute < 0 {
			p.add(base+".rate_per_minute", "must be at least 0 (0: no limit of its own), not %d", op.RatePerMinute)
		}
		switch {
		case op.ConcurrentStreams < 0:
			p.add(base+".concurrent_streams", "must be at least 0 (0: no bound), not %d", op.ConcurrentStreams)
		case op.ConcurrentStreams > 0 && known && !info.Streaming():
			p.add(base+".concurrent_streams", "%q is not a streaming procedure; concurrent_streams applies to streaming calls only", op.Procedure)
		}
		if op.Shadow && op.RatePerMinute == 0 && op.ConcurrentStreams == 0 {
			p.add(base+".shadow", "%q has no limit of its own (rate_per_minute, concurrent_streams) to shadow", op.Procedure)
		}
		switch op.Quota {
		case "":
		case QuotaReserveEnvironment:
			if known && op.Procedure != procCreateEnvironment {
				p.add(base+".quota", "%s applies to %s only", op.Quota, procCreateEnvironment)
			}
		case QuotaReleaseEnvironment:
			if known && op.Procedure != procDeleteEnvironment {
				p.add(base+".quota", "%s applies to %s only", op.Quota, procDeleteEnvironment)
			}
		default:
			p.add(base+".quota", "must be empty, %s or %s, not %q", QuotaReserveEnvironment, QuotaReleaseEnvironment, op.Quota)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(procedures())) {
		if _, ok := seen[name]; !ok {
			p.add("operations", "no row for %q (a list in the file replaces the whole default table)", name)
		}
	}
}

// checkLimits checks plans, subjects' overrides and the Redis-failure
// policy. Maps are checked in the order of their keys, so that the messages
// do not depend on the order of the file or of map iteration.
func checkLimits(p *problems, l Limits) {
	names := slices.Sorted(maps.Keys(l.Plans))
	known := strings.Join(names, ", ")
	if len(l.Plans) == 0 {
		p.add("limits.plans", "must name at least one plan (a plans map in the file replaces the default plans whole)")
	}
	isPlan := func(path, name string) {
		switch _, ok := l.Plans[name]; {
		case ok:
		case name == "":
			p.add(path, "must be set, as one of limits.plans (%s)", known)
		default:
			p.add(path, "%q is not one of limits.plans (%s)", name, known)
		}
	}
	isPlan("limits.default_plan", l.DefaultPlan)
	for _, name := range names {
		path := mapPath("limits.plans", name)
		plan := l.Plans[name]
		if !planName.MatchString(name) {
			p.add(path, "%q is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'", name)
		}
		if plan.RequestsPerMinute < 1 {
			p.add(path+".requests_per_minute", "must be at least 1, not %d", plan.RequestsPerMinute)
		}
		if plan.RequestsPerDay < 0 {
			p.add(path+".requests_per_day", "must be at least 1, or unlimited (no daily cap), not %d", plan.RequestsPerDay)
		}
		if plan.Burst < 1 {
			p.add(path+".burst", "must be at least 1, not %d", plan.Burst)
		}
		checkQuotas(p, path+".quotas", plan.Quotas)
	}

	for _, subject := range slices.Sorted(maps.Keys(l.SubjectPlans)) {
		path := mapPath("limits.subject_plans", subject)
		if subject == "" {
			p.add(path, "the subject (a token's sub) must not be empty")
		}
		isPlan(path, l.SubjectPlans[subject])
	}
	for _, subject := range slices.Sorted(maps.Keys(l.SubjectQuotas)) {
		path := mapPath("limits.subject_quotas", subject)
		if subject == "" {
			p.add(path, "the subject (a token's sub) must not be empty")
		}
		checkQuotas(p, path, l.SubjectQuotas[subject])
	}

	if l.StreamLease < minStreamLease || l.StreamLease > maxStreamLease {
		p.add("limits.stream_lease", "must be between %s and %s, not %s", minStreamLease, maxStreamLease, l.StreamLease)
	}
	if l.ReconcileInterval < time.Second || l.ReconcileInterval > time.Hour {
		p.add("limits.reconcile_interval", "must be between 1s and 1h, not %s", l.ReconcileInterval)
	}
	checkPositiveFloat(p, "limits.environment_size.vcpus", l.EnvironmentSize.VCPUs)
	checkPositiveFloat(p, "limits.environment_size.memory_gb", l.EnvironmentSize.MemoryGB)
	switch l.OnRedisFailure {
	case FailOpen, FailClosed:
	default:
		p.add("limits.on_redis_failure", "must be %s or %s, not %q", FailOpen, FailClosed, l.OnRedisFailure)
	}
	if !(l.LocalShare > 0 && l.LocalShare <= 1) { // NaN too
		p.add("limits.local_share", "must be more than 0 and at most 1, not %v", l.LocalShare)
	}
}

func checkQuotas(p *problems, path string, q Quotas) {
	const count = "must be at least 1, or unlimited, not %v"
	if q.ConcurrentEnvironments < 0 {
		p.add(path+".concurrent_environments", count, q.ConcurrentEnvironments)
	}
	if q.EnvironmentsPerMonth < 0 {
		p.add(path+".environments_per_month", count, q.EnvironmentsPerMonth)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{
		{"vcpu_hours_per_month", float64(q.VCPUHoursPerMonth)},
		{"memory_gb_hours_per_month", float64(q.MemoryGBHoursPerMonth)},
	} {
		if !(f.v >= 0) || math.IsInf(f.v, 1) { // NaN too
			p.add(path+"."+f.key, "must be a finite number more than 0, or unlimited, not %v", f.v)
		}
	}
}

func checkPositiveFloat(p *problems, path string, v float64) {
	if !(v > 0) || math.IsInf(v, 1) { // NaN too
		p.add(path, "must be a finite number more than 0, not %v", v)
	}
}

// plainKey is a map key that reads well in a dotted path.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mapPath names a map's entry: "limits.plans.free", or with the key quoted
// when it would not read as one path element: limits.subject_plans["a.b"].
func mapPath(base, key string) string {
	if plainKey.MatchString(key) {
		return base + "." + key
	}
	return base + "[" + strconv.Quote(key) + "]"
}

func checkIdempotency(p *problems, i Idempotency) {
	if i.TTL < time.Minute || i.TTL > 30*24*time.Hour {
		p.add("idempotency.ttl", "must be between 1m and 720h, not %s", i.TTL)
	}
	if i.Lease < time.Second || i.Lease > time.Hour {
		p.add("idempotency.lease", "must be between 1s and 1h, not %s", i.Lease)
	}
	if i.MaxResponseBytes < KiB || i.MaxResponseBytes > 64*MiB {
		p.add("idempotency.max_response_bytes", "must be between 1KiB and 64MiB, not %s", i.MaxResponseBytes)
	}
	if i.MaxKeysPerSubject < 1 || i.MaxKeysPerSubject > 10_000_000 {
		p.add("idempotency.max_keys_per_subject", "must be between 1 and 10000000, not %d", i.MaxKeysPerSubject)
	}
	if i.OnRedisFailure != FailOpen && i.OnRedisFailure != FailClosed {
		p.add("idempotency.on_redis_failure", "must be %s or %s, not %q", FailOpen, FailClosed, i.OnRedisFailure)
	}
}

// checkCORS checks the origins' form: a browser sends an origin as
// scheme://host[:port], lower case, with nothing after it, so an entry of
// another form would never match and is a mistake.
func checkCORS(p *problems, c CORS) {
	for i, o := range c.AllowedOrigins {
		path := fmt.Sprintf("cors.allowed_origins[%d]", i)
		if o == "*" {
			if len(c.AllowedOrigins) > 1 {
				p.add(path, `"*" allows every origin: list it alone`)
			}
			if c.AllowCredentials {
				p.add("cors.allow_credentials", `must be false with "*" in cors.allowed_origins: browsers refuse credentials for any origin`)
			}
			continue
		}
		host := strings.Replace(o, "://*.", "://x.", 1)
		u, err := url.Parse(host)
		switch {
		case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || host != u.Scheme+"://"+u.Host:
			p.add(path, "must be an origin, scheme://host[:port] with no path, as https://app.example.com or https://*.example.com, not %q", o)
		case strings.Contains(host, "*"):
			p.add(path, `may have one "*", leading the host (https://*.example.com), not %q`, o)
		case o != strings.ToLower(o):
			p.add(path, "must be lower case, as browsers send origins, not %q", o)
		}
	}
	if c.MaxAge < 0 {
		p.add("cors.max_age", "must be 0 or positive, not %s", c.MaxAge)
	}
	switch pl := c.PreflightLimit; {
	case pl.PerMinute < 0:
		p.add("cors.preflight_limit.per_minute", "must be 0 (off) or more, not %d", pl.PerMinute)
	case pl.PerMinute > 0 && pl.Burst < 1:
		p.add("cors.preflight_limit.burst", "must be at least 1, not %d", pl.Burst)
	}
}
