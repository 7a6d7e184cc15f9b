package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
)

// valid returns the defaults with the two required URLs set: the smallest
// configuration that validates.
func valid() *config.Config {
	c := config.Default()
	c.Upstream.URL = "http://127.0.0.1:8082"
	c.Upstream.AdminURL = "http://127.0.0.1:9092" // the backend's admin listener, for reconciliation
	c.OIDC.IssuerURL = "http://127.0.0.1:8081/realms/dev"
	c.OIDC.Audience = "api"
	c.Redis.Addr = "127.0.0.1:6379"
	return c
}

func TestAnyAudienceIsAnExplicitOptOut(t *testing.T) {
	t.Parallel()
	c := valid()
	c.OIDC.Audience = ""
	c.OIDC.AllowAnyAudience = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidDefaultsPass(t *testing.T) {
	t.Parallel()
	if err := valid().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultAloneNeedsUpstreamIssuerAudienceAndRedis(t *testing.T) {
	t.Parallel()
	err := config.Default().Validate()
	want := "4 problems:\n" +
		"  upstream.url: must be set, as http://host:port\n" +
		"  oidc.issuer_url: must be set, as the issuer's URL\n" +
		"  oidc.audience: must be set, as the API's client id at the issuer, which every access token must name in aud " +
		"(or set oidc.allow_any_audience: true to accept tokens minted for any client of the issuer, for development only)\n" +
		"  redis: set addr, cluster_addrs or sentinel.addrs (EDGE_REDIS_ADDR, …): the edge keeps its limits, quotas and idempotency keys in the Redis its replicas share; " +
		"for a Redis on this machine alone, name it (addr: 127.0.0.1:6379): limits then hold per replica"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
}

// TestValidateNamesTheField changes one field per case, so each case has
// exactly one problem and the whole message is compared.
func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *config.Config)
		want   string
	}{
		// Listen and admin addresses.
		{"listen addr empty", func(c *config.Config) { c.Listen.Addr = "" }, `listen.addr: must be set, as host:port`},
		{"listen addr without port", func(c *config.Config) { c.Listen.Addr = "localhost" }, `listen.addr: "localhost" is not host:port`},
		{"listen port too big", func(c *config.Config) { c.Listen.Addr = "127.0.0.1:65536" }, `listen.addr: "127.0.0.1:65536": port must be a number from 0 to 65535`},
		{"listen port named", func(c *config.Config) { c.Listen.Addr = "127.0.0.1:http" }, `listen.addr: "127.0.0.1:http": port must be a number from 0 to 65535`},
		{"admin addr bad", func(c *config.Config) { c.Admin.Addr = "9090" }, `admin.addr: "9090" is not host:port`},
		{"admin same as listen", func(c *config.Config) { c.Admin.Addr = c.Listen.Addr }, `admin.addr: must differ from listen.addr`},

		// Listen timeouts and sizes.
		{"read header timeout zero", func(c *config.Config) { c.Listen.ReadHeaderTimeout = 0 }, `listen.read_header_timeout: must be positive, not 0s`},
		{"idle timeout negative", func(c *config.Config) { c.Listen.IdleTimeout = -time.Second }, `listen.idle_timeout: must be positive, not -1s`},
		{"header bytes small", func(c *config.Config) { c.Listen.MaxHeaderBytes = 512 }, `listen.max_header_bytes: must be at least 1KiB, not 512B`},
		{"shutdown grace zero", func(c *config.Config) { c.Listen.ShutdownGrace = 0 }, `listen.shutdown_grace: must be positive, not 0s`},

		// TLS pairs (files are in TestTLSKeyPair).
		{"tls cert without key", func(c *config.Config) { c.Listen.TLS.CertFile = "tls.crt" }, `listen.tls.key_file: must be set when listen.tls.cert_file is`},
		{"tls key without cert", func(c *config.Config) { c.Listen.TLS.KeyFile = "tls.key" }, `listen.tls.cert_file: must be set when listen.tls.key_file is`},

		// Upstream.
		{"upstream https", func(c *config.Config) { c.Upstream.URL = "https://backend:8443" }, `upstream.url: TLS to the backend is not supported yet: the edge speaks cleartext HTTP/2 (h2c) to it; use http://host:port`},
		{"upstream no scheme", func(c *config.Config) { c.Upstream.URL = "127.0.0.1:8082" }, `upstream.url: must be an http:// URL with a host: first path segment in URL cannot contain colon`},
		{"upstream grpc scheme", func(c *config.Config) { c.Upstream.URL = "grpc://backend:8082" }, `upstream.url: must be an http:// URL with a host`},
		{"upstream no host", func(c *config.Config) { c.Upstream.URL = "http:///x" }, `upstream.url: must be an http:// URL with a host`},
		{"upstream port only", func(c *config.Config) { c.Upstream.URL = "http://:8082" }, `upstream.url: must be an http:// URL with a host`},
		{"upstream path", func(c *config.Config) { c.Upstream.URL = "http://backend:8082/api" }, `upstream.url: must not have a path ("/api"): the edge forwards each call's /svc.v1.<Service>/<Method> as is`},
		{"upstream query", func(c *config.Config) { c.Upstream.URL = "http://backend:8082/?a=b" }, `upstream.url: must not have a query or fragment`},
		{"upstream credentials", func(c *config.Config) { c.Upstream.URL = "http://u:p@backend:8082" }, `upstream.url: must not carry credentials`},
		{"upstream port zero", func(c *config.Config) { c.Upstream.URL = "http://backend:0" }, `upstream.url: port must be a number from 1 to 65535`},
		{"dial timeout zero", func(c *config.Config) { c.Upstream.DialTimeout = 0 }, `upstream.dial_timeout: must be positive, not 0s`},

		// OIDC.
		{"issuer relative", func(c *config.Config) { c.OIDC.IssuerURL = "/realms/dev" }, `oidc.issuer_url: must be an absolute http:// or https:// URL with a host`},
		{"issuer ftp", func(c *config.Config) { c.OIDC.IssuerURL = "ftp://idp/realms/dev" }, `oidc.issuer_url: must be an absolute http:// or https:// URL with a host`},
		{"issuer fragment", func(c *config.Config) { c.OIDC.IssuerURL = "https://idp/realms/dev#x" }, `oidc.issuer_url: must not have a query or fragment`},
		{"clock skew negative", func(c *config.Config) { c.OIDC.ClockSkew = -time.Second }, `oidc.clock_skew: must be between 0s and 5m0s, not -1s`},
		{"clock skew large", func(c *config.Config) { c.OIDC.ClockSkew = 6 * time.Minute }, `oidc.clock_skew: must be between 0s and 5m0s, not 6m0s`},
		{"role claims empty", func(c *config.Config) { c.OIDC.RoleClaims = nil }, `oidc.role_claims: must name at least one claim path`},
		{"role claim bad path", func(c *config.Config) { c.OIDC.RoleClaims = []string{"roles", "realm_access..roles"} }, `oidc.role_claims[1]: "realm_access..roles" is not a dotted claim path such as realm_access.roles`},
		{"plan claim empty", func(c *config.Config) { c.OIDC.PlanClaim = "" }, `oidc.plan_claim: must be set`},
		{"token cache zero", func(c *config.Config) { c.OIDC.TokenCacheSize = 0 }, `oidc.token_cache_size: must be at least 1, not 0`},
		{"http timeout zero", func(c *config.Config) { c.OIDC.HTTPTimeout = 0 }, `oidc.http_timeout: must be positive, not 0s`},
		{"audience and any audience", func(c *config.Config) { c.OIDC.AllowAnyAudience = true }, `oidc.allow_any_audience: must be false when oidc.audience is set`},
		{"azp as audience without audience", func(c *config.Config) {
			c.OIDC.Audience, c.OIDC.AllowAnyAudience, c.OIDC.AzpAsAudience = "", true, true
		}, `oidc.azp_as_audience: needs oidc.audience`},
		{"key refetch zero", func(c *config.Config) { c.OIDC.KeyRefetchInterval = 0 }, `oidc.key_refetch_interval: must be positive, not 0s`},
		{"refused cache negative", func(c *config.Config) { c.OIDC.RefusedTokenCacheSize = -1 }, `oidc.refused_token_cache_size: must be 0 (off) or more, not -1`},
		{"failure limit negative", func(c *config.Config) { c.OIDC.FailureLimit.PerMinute = -1 }, `oidc.failure_limit.per_minute: must be 0 (off) or more, not -1`},
		{"failure limit without burst", func(c *config.Config) { c.OIDC.FailureLimit.Burst = 0 }, `oidc.failure_limit.burst: must be at least 1, not 0`},
		{"cors origin with path", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"https://app.example.com/"} }, `cors.allowed_origins[0]: must be an origin, scheme://host[:port] with no path, as https://app.example.com or https://*.example.com, not "https://app.example.com/"`},
		{"cors origin without scheme", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"app.example.com"} }, `cors.allowed_origins[0]: must be an origin, scheme://host[:port] with no path, as https://app.example.com or https://*.example.com, not "app.example.com"`},
		{"cors star inside host", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"https://app.*.example.com"} }, `cors.allowed_origins[0]: may have one "*", leading the host (https://*.example.com), not "https://app.*.example.com"`},
		{"cors upper case", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"https://App.example.com"} }, `cors.allowed_origins[0]: must be lower case, as browsers send origins, not "https://App.example.com"`},
		{"cors star with others", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"https://a.example.com", "*"} }, `cors.allowed_origins[1]: "*" allows every origin: list it alone`},
		{"cors star with credentials", func(c *config.Config) { c.CORS.AllowedOrigins, c.CORS.AllowCredentials = []string{"*"}, true }, `cors.allow_credentials: must be false with "*" in cors.allowed_origins: browsers refuse credentials for any origin`},
		{"cors max age negative", func(c *config.Config) { c.CORS.MaxAge = -time.Second }, `cors.max_age: must be 0 or positive, not -1s`},
		{"cors preflight limit without burst", func(c *config.Config) { c.CORS.PreflightLimit.Burst = 0 }, `cors.preflight_limit.burst: must be at least 1, not 0`},
		{"client header without proxies", func(c *config.Config) { c.Listen.ClientAddress.Header = "X-Real-IP" }, `listen.client_address.trusted_proxies: must list the proxies that set X-Real-IP: any other peer could forge it`},
		{"proxies without header", func(c *config.Config) { c.Listen.ClientAddress.TrustedProxies = []string{"10.0.0.0/8"} }, `listen.client_address.trusted_proxies: set header or proxy_protocol too: trusted proxies name the client one of these two ways`},
		{"proxy protocol without proxies", func(c *config.Config) { c.Listen.ClientAddress.ProxyProtocol = true }, `listen.client_address.trusted_proxies: must list the proxies that send the PROXY protocol: any other peer could forge it`},
		{"bad proxy", func(c *config.Config) {
			c.Listen.ClientAddress = config.ClientAddress{Header: "X-Real-IP", TrustedProxies: []string{"10.0.0.0/8", "proxy.local"}}
		}, `listen.client_address.trusted_proxies[1]: "proxy.local" is not an IP address or CIDR prefix`},

		// Requests.
		{"body bytes small", func(c *config.Config) { c.Requests.MaxBodyBytes = 1023 }, `requests.max_body_bytes: must be at least 1KiB, not 1023B`},
		{"unary timeout zero", func(c *config.Config) { c.Requests.MaxUnaryTimeout = 0 }, `requests.max_unary_timeout: must be positive, not 0s`},
		{"stream timeout zero", func(c *config.Config) { c.Requests.MaxStreamTimeout = 0 }, `requests.max_stream_timeout: must be positive, not 0s`},

		// Redis.
		{"redis addr without host", func(c *config.Config) { c.Redis.Addr = ":6379" }, `redis.addr: ":6379": needs a host`},
		{"redis addr port zero", func(c *config.Config) { c.Redis.Addr = "redis:0" }, `redis.addr: "redis:0": port must be a number from 1 to 65535`},
		{"redis cluster addr bad", func(c *config.Config) { c.Redis.Addr, c.Redis.ClusterAddrs = "", []string{"redis-0:6379", "redis-1"} }, `redis.cluster_addrs[1]: "redis-1" is not host:port`},
		{"redis none", func(c *config.Config) { c.Redis.Addr = "" }, `redis: set addr, cluster_addrs or sentinel.addrs (EDGE_REDIS_ADDR, …): the edge keeps its limits, quotas and idempotency keys in the Redis its replicas share; ` +
			`for a Redis on this machine alone, name it (addr: 127.0.0.1:6379): limits then hold per replica`},
		{"redis key prefix with a brace", func(c *config.Config) { c.Redis.KeyPrefix = "a{b" }, `redis.key_prefix: must be at most 64 characters without braces (they would break the keys' cluster hash tags)`},
		{"idempotency ttl too short", func(c *config.Config) { c.Idempotency.TTL = time.Second }, `idempotency.ttl: must be between 1m and 720h, not 1s`},
		{"idempotency lease zero", func(c *config.Config) { c.Idempotency.Lease = 0 }, `idempotency.lease: must be between 1s and 1h, not 0s`},
		{"idempotency response bound", func(c *config.Config) { c.Idempotency.MaxResponseBytes = 10 }, `idempotency.max_response_bytes: must be between 1KiB and 64MiB, not 10B`},
		{"idempotency policy", func(c *config.Config) { c.Idempotency.OnRedisFailure = "maybe" }, `idempotency.on_redis_failure: must be fail_open or fail_closed, not "maybe"`},
		{"redis timeout zero", func(c *config.Config) { c.Redis.Timeout = 0 }, `redis.timeout: must be positive and at most 10s, not 0s`},
		{"redis timeout large", func(c *config.Config) { c.Redis.Timeout = 11 * time.Second }, `redis.timeout: must be positive and at most 10s, not 11s`},

		// Limits.
		{"no plans", func(c *config.Config) { c.Limits.Plans = map[string]config.Plan{} }, "2 problems:\n" +
			"  limits.plans: must name at least one plan (a plans map in the file replaces the default plans whole)\n" +
			`  limits.default_plan: "free" is not one of limits.plans ()`},
		{"plan name upper case", func(c *config.Config) { c.Limits.Plans["Gold"] = c.Limits.Plans["pro"] },
			`limits.plans.Gold: "Gold" is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'`},
		{"plan name starts with a digit", func(c *config.Config) { c.Limits.Plans["1x"] = c.Limits.Plans["pro"] },
			`limits.plans.1x: "1x" is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'`},
		{"plan name with a dot", func(c *config.Config) { c.Limits.Plans["pro.v2"] = c.Limits.Plans["pro"] },
			`limits.plans["pro.v2"]: "pro.v2" is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'`},
		{"plan name too long", func(c *config.Config) { c.Limits.Plans["p"+strings.Repeat("x", 32)] = c.Limits.Plans["pro"] },
			`limits.plans.p` + strings.Repeat("x", 32) + `: "p` + strings.Repeat("x", 32) + `" is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'`},
		{"plan name empty", func(c *config.Config) { c.Limits.Plans[""] = c.Limits.Plans["pro"] },
			`limits.plans[""]: "" is not a plan name: a lowercase letter, then up to 31 lowercase letters, digits, '_' or '-'`},
		{"default plan empty", func(c *config.Config) { c.Limits.DefaultPlan = "" }, `limits.default_plan: must be set, as one of limits.plans (enterprise, free, pro)`},
		{"default plan unknown", func(c *config.Config) { c.Limits.DefaultPlan = "Free" }, `limits.default_plan: "Free" is not one of limits.plans (enterprise, free, pro)`},
		{"rate zero", func(c *config.Config) { setPlan(c, "pro", func(p *config.Plan) { p.RequestsPerMinute = 0 }) },
			`limits.plans.pro.requests_per_minute: must be at least 1, not 0`},
		{"daily cap negative", func(c *config.Config) { setPlan(c, "free", func(p *config.Plan) { p.RequestsPerDay = -1 }) },
			`limits.plans.free.requests_per_day: must be at least 1, or unlimited (no daily cap), not -1`},
		{"burst zero", func(c *config.Config) { setPlan(c, "enterprise", func(p *config.Plan) { p.Burst = 0 }) },
			`limits.plans.enterprise.burst: must be at least 1, not 0`},
		{"concurrent environments negative", func(c *config.Config) {
			setPlan(c, "free", func(p *config.Plan) { p.Quotas.ConcurrentEnvironments = -2 })
		},
			`limits.plans.free.quotas.concurrent_environments: must be at least 1, or unlimited, not -2`},
		{"environments per month negative", func(c *config.Config) {
			setPlan(c, "free", func(p *config.Plan) { p.Quotas.EnvironmentsPerMonth = -1 })
		},
			`limits.plans.free.quotas.environments_per_month: must be at least 1, or unlimited, not -1`},
		{"vcpu hours negative", func(c *config.Config) { setPlan(c, "free", func(p *config.Plan) { p.Quotas.VCPUHoursPerMonth = -0.5 }) },
			`limits.plans.free.quotas.vcpu_hours_per_month: must be a finite number more than 0, or unlimited, not -0.5`},
		{"vcpu hours NaN", func(c *config.Config) {
			setPlan(c, "free", func(p *config.Plan) { p.Quotas.VCPUHoursPerMonth = config.Amount(math.NaN()) })
		},
			`limits.plans.free.quotas.vcpu_hours_per_month: must be a finite number more than 0, or unlimited, not NaN`},
		{"memory hours infinite", func(c *config.Config) {
			setPlan(c, "pro", func(p *config.Plan) { p.Quotas.MemoryGBHoursPerMonth = config.Amount(math.Inf(1)) })
		},
			`limits.plans.pro.quotas.memory_gb_hours_per_month: must be a finite number more than 0, or unlimited, not +Inf`},
		{"subject plan unknown", func(c *config.Config) { c.Limits.SubjectPlans = map[string]string{"alice": "pro", "bob": "gold"} },
			`limits.subject_plans.bob: "gold" is not one of limits.plans (enterprise, free, pro)`},
		{"subject plan empty", func(c *config.Config) { c.Limits.SubjectPlans = map[string]string{"bob@example.com": ""} },
			`limits.subject_plans["bob@example.com"]: must be set, as one of limits.plans (enterprise, free, pro)`},
		{"subject plan without subject", func(c *config.Config) { c.Limits.SubjectPlans = map[string]string{"": "pro"} },
			`limits.subject_plans[""]: the subject (a token's sub) must not be empty`},
		{"subject quotas negative", func(c *config.Config) {
			c.Limits.SubjectQuotas = map[string]config.Quotas{"alice": {}, "bob": {VCPUHoursPerMonth: 10, EnvironmentsPerMonth: -1}}
		}, `limits.subject_quotas.bob.environments_per_month: must be at least 1, or unlimited, not -1`},
		{"subject quotas NaN", func(c *config.Config) {
			c.Limits.SubjectQuotas = map[string]config.Quotas{"bob": {MemoryGBHoursPerMonth: config.Amount(math.NaN())}}
		}, `limits.subject_quotas.bob.memory_gb_hours_per_month: must be a finite number more than 0, or unlimited, not NaN`},
		{"subject quotas without subject", func(c *config.Config) { c.Limits.SubjectQuotas = map[string]config.Quotas{"": {}} },
			`limits.subject_quotas[""]: the subject (a token's sub) must not be empty`},
		{"stream lease short", func(c *config.Config) { c.Limits.StreamLease = 2 * time.Second }, `limits.stream_lease: must be between 3s and 10m0s, not 2s`},
		{"stream lease long", func(c *config.Config) { c.Limits.StreamLease = 11 * time.Minute }, `limits.stream_lease: must be between 3s and 10m0s, not 11m0s`},
		{"vcpus zero", func(c *config.Config) { c.Limits.EnvironmentSize.VCPUs = 0 }, `limits.environment_size.vcpus: must be a finite number more than 0, not 0`},
		{"memory negative", func(c *config.Config) { c.Limits.EnvironmentSize.MemoryGB = -4 }, `limits.environment_size.memory_gb: must be a finite number more than 0, not -4`},
		{"memory infinite", func(c *config.Config) { c.Limits.EnvironmentSize.MemoryGB = math.Inf(1) }, `limits.environment_size.memory_gb: must be a finite number more than 0, not +Inf`},
		{"on redis failure", func(c *config.Config) { c.Limits.OnRedisFailure = "open" }, `limits.on_redis_failure: must be fail_open or fail_closed, not "open"`},
		{"on redis failure empty", func(c *config.Config) { c.Limits.OnRedisFailure = "" }, `limits.on_redis_failure: must be fail_open or fail_closed, not ""`},
		{"local share zero", func(c *config.Config) { c.Limits.LocalShare = 0 }, `limits.local_share: must be more than 0 and at most 1, not 0`},
		{"local share above one", func(c *config.Config) { c.Limits.LocalShare = 1.5 }, `limits.local_share: must be more than 0 and at most 1, not 1.5`},
		{"local share NaN", func(c *config.Config) { c.Limits.LocalShare = math.NaN() }, `limits.local_share: must be more than 0 and at most 1, not NaN`},

		// Operations.
		{"operations empty", func(c *config.Config) { c.Operations = nil }, `operations: empty: list a row for every procedure, or omit operations to use the default table`},
		{"operation unknown", func(c *config.Config) { c.Operations[3].Procedure = "/svc.v1.X/Y" }, "2 problems:\n" +
			`  operations[3].procedure: unknown procedure "/svc.v1.X/Y"` + "\n" +
			`  operations: no row for "/svc.v1.EnvironmentService/DeleteEnvironment" (a list in the file replaces the whole default table)`},
		{"operation duplicate", func(c *config.Config) { c.Operations = append(c.Operations, c.Operations[2]) }, `operations[22].procedure: "/svc.v1.EnvironmentService/CreateEnvironment" is listed already, as operations[2]`},
		{"operation missing", func(c *config.Config) { c.Operations = c.Operations[:21] }, `operations: no row for "/svc.v1.UsageService/GetUsage" (a list in the file replaces the whole default table)`},
		{"operation without roles", func(c *config.Config) { c.Operations[0].ServiceAccountRoles = nil }, `operations[0].service_account_roles: must name at least one role`},
		{"operation person role", func(c *config.Config) { c.Operations[1].ServiceAccountRoles = []string{"svc-admin", "admin"} }, `operations[1].service_account_roles[1]: "admin" is not a service-account role: it must start with "svc-"`},
		{"operation bare prefix", func(c *config.Config) { c.Operations[1].ServiceAccountRoles = []string{"svc-"} }, `operations[1].service_account_roles[0]: "svc-" is not a service-account role: it must start with "svc-"`},
		{"idempotent stream", func(c *config.Config) { c.Operations[6].Idempotent = true }, `operations[6].idempotent: "/svc.v1.EnvironmentService/WatchEnvironment" is a streaming procedure; Idempotency-Key applies to unary calls only`},
		{"operation rate negative", func(c *config.Config) { c.Operations[0].RatePerMinute = -1 }, `operations[0].rate_per_minute: must be at least 0 (0: no limit of its own), not -1`},
		{"operation shadow without a limit", func(c *config.Config) { c.Operations[5].Shadow = true },
			`operations[5].shadow: "/svc.v1.EnvironmentService/ListEnvironments" has no limit of its own (rate_per_minute, concurrent_streams) to shadow`},
		{"operation streams negative", func(c *config.Config) { c.Operations[6].ConcurrentStreams = -1 }, `operations[6].concurrent_streams: must be at least 0 (0: no bound), not -1`},
		{"operation streams on unary", func(c *config.Config) { c.Operations[5].ConcurrentStreams = 5 },
			`operations[5].concurrent_streams: "/svc.v1.EnvironmentService/ListEnvironments" is not a streaming procedure; concurrent_streams applies to streaming calls only`},
		{"operation quota unknown", func(c *config.Config) { c.Operations[2].Quota = "reserve" },
			`operations[2].quota: must be empty, reserve_environment or release_environment, not "reserve"`},
		{"reserve on another procedure", func(c *config.Config) { c.Operations[3].Quota = "reserve_environment" },
			`operations[3].quota: reserve_environment applies to /svc.v1.EnvironmentService/CreateEnvironment only`},
		{"release on another procedure", func(c *config.Config) { c.Operations[2].Quota = "release_environment" },
			`operations[2].quota: release_environment applies to /svc.v1.EnvironmentService/DeleteEnvironment only`},
		{"release on a read", func(c *config.Config) { c.Operations[4].Quota = "release_environment" },
			`operations[4].quota: release_environment applies to /svc.v1.EnvironmentService/DeleteEnvironment only`},

		// Log.
		{"log format", func(c *config.Config) { c.Log.Format = "JSON" }, `log.format: must be json or text, not "JSON"`},
		{"log level", func(c *config.Config) { c.Log.Level = "warning" }, `log.level: must be debug, info, warn or error, not "warning"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tt.change(c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestValidateAcceptsTheOtherForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *config.Config)
	}{
		{"every interface", func(c *config.Config) { c.Listen.Addr = ":8080" }},
		{"any free ports, as in tests", func(c *config.Config) { c.Listen.Addr, c.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0" }},
		{"ipv6 listen", func(c *config.Config) { c.Listen.Addr = "[::1]:8080" }},
		{"upstream with slash", func(c *config.Config) { c.Upstream.URL = "http://backend.internal:8082/" }},
		{"upstream default port", func(c *config.Config) { c.Upstream.URL = "http://backend.internal" }},
		{"https issuer", func(c *config.Config) { c.OIDC.IssuerURL = "https://id.example.com/realms/prod" }},
		{"zero skew", func(c *config.Config) { c.OIDC.ClockSkew = 0 }},
		{"single redis", func(c *config.Config) { c.Redis.Addr = "redis.internal:6379" }},
		{"redis cluster", func(c *config.Config) {
			c.Redis.Addr, c.Redis.ClusterAddrs = "", []string{"redis-0:6379", "[fd00::1]:6379"}
		}},
		{"custom service role", func(c *config.Config) { c.Operations[0].ServiceAccountRoles = []string{"svc-catalog-reader"} }},
		{"unary longer than stream", func(c *config.Config) { c.Requests.MaxUnaryTimeout = 2 * time.Hour }},
		{"text debug log", func(c *config.Config) { c.Log.Format, c.Log.Level = "text", "debug" }},
		{"one plan only", func(c *config.Config) {
			c.Limits.Plans = map[string]config.Plan{"basic_2": {RequestsPerMinute: 1, Burst: 1}}
			c.Limits.DefaultPlan = "basic_2"
		}},
		{"longest plan name", func(c *config.Config) {
			c.Limits.Plans["p"+strings.Repeat("x", 31)] = config.Plan{RequestsPerMinute: 1, Burst: 1}
		}},
		{"subject overrides", func(c *config.Config) {
			c.Limits.SubjectPlans = map[string]string{"3f1c7a2e-5b8d-4c1e-9a0f-2d6b8e4c1a7f": "enterprise", "svc.ci@example.com": "pro"}
			c.Limits.SubjectQuotas = map[string]config.Quotas{"3f1c7a2e-5b8d-4c1e-9a0f-2d6b8e4c1a7f": {VCPUHoursPerMonth: 1e6}}
		}},
		{"fail closed, one replica", func(c *config.Config) { c.Limits.OnRedisFailure, c.Limits.LocalShare = "fail_closed", 1 }},
		{"stream lease bounds", func(c *config.Config) { c.Limits.StreamLease = 3 * time.Second }},
		{"stream lease upper bound", func(c *config.Config) { c.Limits.StreamLease = 10 * time.Minute }},
		{"fractional environment", func(c *config.Config) { c.Limits.EnvironmentSize = config.EnvironmentSize{VCPUs: 0.5, MemoryGB: 0.25} }},
		{"no per-operation limits", func(c *config.Config) {
			for i := range c.Operations {
				c.Operations[i].RatePerMinute, c.Operations[i].ConcurrentStreams, c.Operations[i].Quota = 0, 0, ""
			}
		}},
		{"rate on a stream", func(c *config.Config) { c.Operations[6].RatePerMinute = 5 }},
		{"cors origins", func(c *config.Config) {
			c.CORS.AllowedOrigins = []string{"https://console.example.com", "https://*.example.com", "http://127.0.0.1:3000"}
			c.CORS.AllowCredentials = true
		}},
		{"cors any origin", func(c *config.Config) { c.CORS.AllowedOrigins = []string{"*"} }},
	}
	for _, tt := range tests {
		c := valid()
		tt.change(c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestValidateReportsEveryProblemInFieldOrder(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Log.Level = "loud"
	c.Listen.Addr = "nope"
	c.Redis.Timeout = 0
	c.Upstream.URL = "https://backend:8443"
	err := c.Validate()
	want := "4 problems:\n" +
		`  listen.addr: "nope" is not host:port` + "\n" +
		"  upstream.url: TLS to the backend is not supported yet: the edge speaks cleartext HTTP/2 (h2c) to it; use http://host:port\n" +
		"  redis.timeout: must be positive and at most 10s, not 0s\n" +
		`  log.level: must be debug, info, warn or error, not "loud"`
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
	var unwrapper interface{ Unwrap() []error }
	if !errors.As(err, &unwrapper) || len(unwrapper.Unwrap()) != 4 {
		t.Errorf("the error does not unwrap to its 4 problems")
	}
}

// setPlan changes one plan of c.
func setPlan(c *config.Config, name string, change func(p *config.Plan)) {
	p := c.Limits.Plans[name]
	change(&p)
	c.Limits.Plans[name] = p
}

func TestTLSKeyPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir, "a")
	_, otherKey := writeSelfSigned(t, dir, "b")
	missing := filepath.Join(dir, "missing.pem")

	// want is the start of the message: the rest is the standard library's.
	tests := []struct {
		name      string
		cert, key string
		want      string
	}{
		{name: "matching pair", cert: cert, key: key},
		{name: "key of another cert", cert: cert, key: otherKey,
			want: "listen.tls: cert_file and key_file do not load as a key pair: tls: private key does not match public key"},
		{name: "cert missing", cert: missing, key: key,
			want: "listen.tls.cert_file: stat " + missing + ": no such file or directory"},
		{name: "both missing", cert: missing, key: missing,
			want: "2 problems:\n  listen.tls.cert_file: stat " + missing + ": no such file or directory\n  listen.tls.key_file: stat " + missing + ": no such file or directory"},
		{name: "directory", cert: cert, key: dir,
			want: "listen.tls.key_file: " + dir + " is not a regular file"},
		{name: "cert and key swapped", cert: key, key: cert,
			want: "listen.tls: cert_file and key_file do not load as a key pair: tls: failed to find certificate PEM data"},
	}
	for _, tt := range tests {
		c := valid()
		c.Listen.TLS = config.TLS{CertFile: tt.cert, KeyFile: tt.key}
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: Validate() = %v\nwant %s", tt.name, err, tt.want)
		}
	}
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files in dir, and returns their paths.
func writeSelfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "edge test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
