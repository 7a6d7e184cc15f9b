// Package config loads and validates the edge's configuration: one YAML file,
// with environment variables overriding addresses and secrets. Validation
// names the field at fault. The shipped defaults hold the specification's
// tables.
//
// It only describes configuration; the packages of the edge read it.
package config

import "time"

// Config is the edge's whole configuration.
type Config struct {
	Listen   Listen   `yaml:"listen"`
	Admin    Admin    `yaml:"admin"`
	Upstream Upstream `yaml:"upstream"`
	OIDC     OIDC     `yaml:"oidc"`
	Requests Requests `yaml:"requests"`
	Redis    Redis    `yaml:"redis"`
	// Limits are the plans, quotas and Redis-failure policy; per-operation
	// limits are columns of Operations.
	Limits Limits `yaml:"limits"`
	// Idempotency configures Idempotency-Key replay.
	Idempotency Idempotency `yaml:"idempotency"`
	// Operations is the operation table, one row per procedure of the API.
	// Default DefaultOperations(); a list in the file replaces it whole.
	Operations []Operation `yaml:"operations"`
	// CORS lets pages on other origins call the API from a browser.
	CORS CORS `yaml:"cors"`
	Log  Log  `yaml:"log"`
}

// CORS says which pages on other origins may call the API from a browser
// (docs/api.md, Browsers). It reloads with the policy.
type CORS struct {
	// AllowedOrigins are the origins whose pages may call the API: exact
	// origins ("https://app.example.com", scheme, host and port as the
	// browser sends them), patterns with one "*" leading the host
	// ("https://*.example.com": any subdomain, not example.com itself), or
	// "*" alone for any origin. Empty (the default): no CORS; browsers
	// allow same-origin pages only.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MaxAge is how long a browser may keep a preflight's answer, in whole
	// seconds. Default 2h (Chromium's own cap). 0: browsers ask every time.
	MaxAge time.Duration `yaml:"max_age"`
	// AllowCredentials lets pages send cookies and TLS client certificates.
	// The API authenticates with bearer tokens, which need no such thing:
	// off unless set. Not with "*".
	AllowCredentials bool `yaml:"allow_credentials"`
	// PreflightLimit bounds the preflight requests per client address.
	PreflightLimit PreflightLimit `yaml:"preflight_limit"`
}

// PreflightLimit is a token bucket per client address, taken from by every
// preflight (OPTIONS) request: while a client's bucket is empty, its
// preflights are refused with 429.
type PreflightLimit struct {
	// PerMinute refills the bucket. 0 turns the limit off. Default 600.
	PerMinute int `yaml:"per_minute"`
	// Burst is the bucket's size. Default 100.
	Burst int `yaml:"burst"`
}

// Listen is the API listener.
type Listen struct {
	// Addr is host:port. Default 127.0.0.1:8080. Env EDGE_LISTEN_ADDR.
	Addr string `yaml:"addr"`
	// TLS, when both files are set, serves HTTPS with ALPN h2 and http/1.1;
	// otherwise HTTP/1.1 and cleartext HTTP/2. Env EDGE_TLS_CERT_FILE, EDGE_TLS_KEY_FILE.
	TLS TLS `yaml:"tls"`
	// ReadHeaderTimeout bounds reading a request's headers. Default 5s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes idle keep-alive connections. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// ShutdownGrace is how long open calls may drain on shutdown. Default 30s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// ClientAddress says where a call's client address comes from, for
	// every per-address bound. Default: the socket peer.
	ClientAddress ClientAddress `yaml:"client_address"`
	// HTTP2IdleTimeout closes (GOAWAY) an HTTP/2 connection that has had
	// no open stream for this long, from its start: one that sends no
	// request, or half a request's headers, is cut as soon as an HTTP/1.1
	// one whose headers are slow. Default 5s.
	HTTP2IdleTimeout time.Duration `yaml:"http2_idle_timeout"`
	// MaxConnectionsPerAddress bounds the open connections of one peer
	// address (an IPv6 peer by its /64): past it, a new connection is
	// closed at once. Default 256; 0: no bound.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// ConnectionBoundExempt are peers (IP addresses or CIDR prefixes) whose
	// connections MaxConnectionsPerAddress does not bound: proxies in front
	// of the edge, whose one address carries many clients. Default:
	// ClientAddress.TrustedProxies. Env EDGE_CONNECTION_BOUND_EXEMPT
	// (comma-separated).
	ConnectionBoundExempt []string `yaml:"connection_bound_exempt"`
	// MaxResetsPerConnection: an HTTP/2 connection whose client has reset
	// this many streams before their answer, and more than it let finish,
	// is closed (GOAWAY) (HTTP/2 rapid reset, CVE-2023-44487). Default
	// 100; 0: no bound.
	MaxResetsPerConnection int `yaml:"max_resets_per_connection"`
	// MaxEarlyCalls: after the edge refused a subject's call for a limit
	// and told it when to retry (Retry-After), a call of the same subject
	// that the same limit would refuse again, made before that time, is
	// early; past this many early calls in a row, the subject's early
	// calls for that limit are held until the time (at most
	// MaxEarlyCallHold), then decided as any call. Calls the limit does
	// not concern are never held, whatever connection or token they share.
	// Default 5; 0: none is held.
	MaxEarlyCalls int `yaml:"max_early_calls"`
	// MaxEarlyCallHold bounds how long one early call is held. Default 1m.
	MaxEarlyCallHold time.Duration `yaml:"max_early_call_hold"`
	// MaxHeldCallsPerSubject bounds the calls of one subject held at once
	// (each holds a goroutine and its request); past it an early call is
	// decided at once (and refused). Default 1024.
	MaxHeldCallsPerSubject int `yaml:"max_held_calls_per_subject"`
	// MaxCallsInFlight bounds the unary calls one replica serves at once:
	// past it a call is answered unavailable (EDGE_OVERLOADED, Retry-After
	// 1 s) at once, before its token is read, so that an overload costs
	// little and does not grow the process's memory. Streams are not
	// counted (their own caps bound them). Default 4096; 0: no bound.
	MaxCallsInFlight int `yaml:"max_calls_in_flight"`
}

// ClientAddress says how the edge tells a call's client behind the proxies
// in front of it, for every bound kept per client address (failed
// authentications, CORS preflights, open connections). A call whose socket
// peer is not one of TrustedProxies is judged by its peer, whatever its
// headers say. docs/operations.md, "Behind a proxy or load balancer", has
// the settings for the usual topologies.
type ClientAddress struct {
	// ProxyProtocol accepts the PROXY protocol (v1 and v2) from
	// TrustedProxies on the API listener: a layer-4 proxy (nginx's stream
	// module with proxy_protocol on, HAProxy's send-proxy, a cloud load
	// balancer) names the client before the connection's first byte, and
	// the connection is the client's from then on. A peer not trusted that
	// sends the header is served as HTTP (and fails to parse). Env
	// EDGE_PROXY_PROTOCOL (true or false).
	ProxyProtocol bool `yaml:"proxy_protocol"`
	// Header is X-Forwarded-For, Forwarded, X-Real-IP or another header a
	// layer-7 proxy sets: a list is read from its last entry towards its
	// first, and the first entry that is not a trusted proxy is the client.
	// Empty: the peer is the client. Env EDGE_CLIENT_ADDRESS_HEADER.
	Header string `yaml:"header"`
	// TrustedProxies are IP addresses or CIDR prefixes of the proxies in
	// front of the edge: their PROXY protocol header (ProxyProtocol) or
	// Header is believed, and their own address is never bounded as a
	// client's. Required with Header or ProxyProtocol. Env
	// EDGE_TRUSTED_PROXIES (comma-separated).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// WarnSubjectsPerAddress: when tokens of this many subjects come from
	// one client address, the edge logs it (once per address) and counts
	// it (edge_client_addresses_shared_total): many subjects behind one
	// address usually mean a proxy in front that the settings above do not
	// name, and then every per-address bound is shared by all its clients.
	// Default 50; 0: off.
	WarnSubjectsPerAddress int `yaml:"warn_subjects_per_address"`
}

// TLS names a certificate and its key, PEM files.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Admin is the admin listener: /metrics, /healthz, /readyz.
type Admin struct {
	// Addr is host:port. Default 127.0.0.1:9090. Env EDGE_ADMIN_ADDR.
	Addr string `yaml:"addr"`
	// Pprof serves Go's profiles under /debug/pprof/ on this listener
	// (CPU, heap, goroutines: what a profile of a live edge needs). Off by
	// default: a profile costs CPU while it runs and shows internals. On in
	// the development mode.
	Pprof bool `yaml:"pprof"`
}

// Upstream is the backend the edge forwards to: gRPC calls and streams
// over cleartext HTTP/2, other calls over pooled HTTP/1.1.
type Upstream struct {
	// URL is http://host:port. Required unless URLs is set. Env
	// EDGE_UPSTREAM_URL (which also clears URLs).
	URL string `yaml:"url"`
	// URLs, when set, are several backends (http://host:port each); calls
	// are balanced over them and URL is ignored.
	URLs []string `yaml:"urls"`
	// DialTimeout bounds connecting to the backend. Default 2s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// AdminURL is the backend's admin listener, http://host:port, where the
	// edge reconciles its environment quota records with the backend's
	// environments (limits.reconcile_interval). Empty: no reconciliation
	// (environments deleted around the edge keep their quota slot). Env
	// EDGE_UPSTREAM_ADMIN_URL.
	AdminURL string `yaml:"admin_url"`
	// ResolveInterval: host names are looked up again this often and every
	// address is a backend of its own (a Kubernetes headless Service).
	// Default 10s; 0: never (the name is dialed as is, and the resolver
	// picks one address per connection).
	ResolveInterval time.Duration `yaml:"resolve_interval"`
	// MaxConnectionAge retires connections this old (±10%), so that a
	// Service spreads new ones over new pods. Default 5m; 0: never.
	MaxConnectionAge time.Duration `yaml:"max_connection_age"`
	// EjectFor is how long a backend that refuses connections (or fails
	// three calls in a row, or fails a health check right after a call
	// timed out in it) gets no calls. Default 10s.
	EjectFor time.Duration `yaml:"eject_for"`
	// HealthCheck: the edge checks every backend on its own.
	HealthCheck HealthCheck `yaml:"health_check"`
}

// HealthCheck configures the edge's active checks of each backend: gRPC
// health checking (grpc.health.v1.Health/Check) on the backend's API
// address, which orgsvc answers SERVING while its storage answers (what its
// /readyz says).
type HealthCheck struct {
	// Interval between two checks of a backend. Default 5s; 0: no checks,
	// and no ejection on timeouts (for a backend without gRPC health).
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one check: a backend that takes longer fails it.
	// Default 1s; at most Interval.
	Timeout time.Duration `yaml:"timeout"`
	// UnhealthyThreshold failed checks in a row take a backend out of the
	// pool. Default 2.
	UnhealthyThreshold int `yaml:"unhealthy_threshold"`
	// HealthyThreshold passed checks in a row bring it back. Default 2.
	HealthyThreshold int `yaml:"healthy_threshold"`
	// Service is the service name to check; "" (the default): the server
	// as a whole.
	Service string `yaml:"service"`
}

// Backends are the upstream URLs: URLs, or URL alone.
func (u Upstream) Backends() []string {
	if len(u.URLs) > 0 {
		return u.URLs
	}
	return []string{u.URL}
}

// OIDC configures token verification.
type OIDC struct {
	// IssuerURL is the OIDC issuer. Required. Env EDGE_OIDC_ISSUER_URL.
	IssuerURL string `yaml:"issuer_url"`
	// Audience is the API's own client id at the issuer; every token must
	// name it in aud. Required unless AllowAnyAudience. Env EDGE_OIDC_AUDIENCE.
	Audience string `yaml:"audience"`
	// AllowAnyAudience accepts tokens minted for any client of the issuer.
	// For development only; excludes Audience. Default false.
	AllowAnyAudience bool `yaml:"allow_any_audience"`
	// AzpAsAudience also accepts a token whose azp is Audience (one the API's
	// own client got for itself) when its aud does not name Audience.
	// Default false.
	AzpAsAudience bool `yaml:"azp_as_audience"`
	// ClockSkew tolerated on exp. Default 30s; at most 5m.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// RoleClaims are dotted claim paths holding roles; "${audience}" stands
	// for Audience and "${azp}" for the token's azp. Default Keycloak's realm
	// roles and the client roles of the API's own client.
	RoleClaims []string `yaml:"role_claims"`
	// PlanClaim names the claim carrying the subject's plan. Default "plan".
	PlanClaim string `yaml:"plan_claim"`
	// TokenCacheSize bounds the verified-token cache. Default 100000.
	TokenCacheSize int `yaml:"token_cache_size"`
	// HTTPTimeout bounds discovery and JWKS requests. Default 5s.
	HTTPTimeout time.Duration `yaml:"http_timeout"`
	// KeyRefetchInterval is the least time between two fetches of the
	// issuer's keys (JWKS) caused by tokens naming an unknown key id.
	// Default 10s.
	KeyRefetchInterval time.Duration `yaml:"key_refetch_interval"`
	// RefusedTokenCacheSize bounds the refused tokens remembered, so that
	// a refused token sent again is refused without verifying it. 0: none.
	// Default 10000.
	RefusedTokenCacheSize int `yaml:"refused_token_cache_size"`
	// FailureLimit bounds the failed authentications per client address.
	FailureLimit FailureLimit `yaml:"failure_limit"`
}

// FailureLimit is a token bucket per client address, taken from by every
// call refused as unauthenticated. While a client's bucket is empty, its
// calls with a token the edge has not verified before are refused
// (resource_exhausted) without verifying it.
type FailureLimit struct {
	// PerMinute refills the bucket. 0 turns the limit off. Default 60.
	PerMinute int `yaml:"per_minute"`
	// Burst is the bucket's size. Default 20.
	Burst int `yaml:"burst"`
}

// Requests bounds what clients send and how long calls may run.
type Requests struct {
	// MaxBodyBytes bounds a request body. Default 4 MiB.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// MaxUnaryTimeout caps a unary call's deadline, and is the deadline of a
	// call that sets none. Default 30s.
	MaxUnaryTimeout time.Duration `yaml:"max_unary_timeout"`
	// MaxStreamTimeout caps a streaming call's deadline, and is the deadline
	// of a stream that sets none. Default 1h.
	MaxStreamTimeout time.Duration `yaml:"max_stream_timeout"`
	// StreamWriteTimeout ends a stream whose client stops reading: a write
	// to it that cannot complete within this long ends the stream, so that
	// a stalled reader holds neither memory nor a stream lease. Default 30s.
	StreamWriteTimeout time.Duration `yaml:"stream_write_timeout"`
	// BodyTimeout bounds how long a unary call's whole body may take to
	// arrive, from its headers: a slow client cannot pin a connection, a
	// goroutine and the call's reservations. Past it the call ends with
	// deadline_exceeded (REQUEST_BODY_TIMEOUT). Default 10s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// StreamMessageTimeout bounds each message a client streams: the first
	// must begin within it of the headers, and each must be whole within it
	// of its first byte. Idle time between messages is the stream's own
	// deadline's business. Default 10s.
	StreamMessageTimeout time.Duration `yaml:"stream_message_timeout"`
}

// Redis is the edge's shared state.
type Redis struct {
	// Addr is one Redis host:port. No default: one of Addr, ClusterAddrs
	// and Sentinel.Addrs is required (a Redis on this machine alone is
	// named like any other, e.g. 127.0.0.1:6379). Env EDGE_REDIS_ADDR.
	// Every address here and in ClusterAddrs may also be written
	// redis://host:port, or rediss://host:port for TLS (as if TLS.Enabled).
	Addr string `yaml:"addr"`
	// ClusterAddrs, instead of Addr, are seed nodes of a Redis Cluster; when
	// set, Addr is ignored.
	// Env EDGE_REDIS_CLUSTER_ADDRS (comma-separated).
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// Sentinel, when its addrs are set, finds the master through Redis
	// Sentinel, instead of Addr and ClusterAddrs.
	Sentinel RedisSentinel `yaml:"sentinel"`
	// Username and Password authenticate to Redis (an ACL user, or the
	// password alone for requirepass). Env EDGE_REDIS_USERNAME,
	// EDGE_REDIS_PASSWORD (prefer the variable for the password).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS encrypts the connections to Redis (and to the sentinels).
	TLS RedisTLS `yaml:"tls"`
	// KeyPrefix starts every key the edge writes, so that several
	// installations can share one Redis. No braces. Default "edge:".
	KeyPrefix string `yaml:"key_prefix"`
	// Timeout bounds every Redis command once it has a connection: its
	// write and its read each (socket deadlines). Default 50ms.
	Timeout time.Duration `yaml:"timeout"`
	// PoolTimeout bounds waiting for a connection, dialling one included,
	// apart from Timeout: a fresh edge, or a burst past the idle
	// connections, dials while its calls wait, and a connection being set
	// up is no slow Redis. Default 1s; at most 30s.
	PoolTimeout time.Duration `yaml:"pool_timeout"`
	// PoolSize bounds the connections to each Redis node. Default 256.
	PoolSize int `yaml:"pool_size"`
	// MinIdleConns are opened at start and kept open, per node, so that
	// the first burst does not wait for dials. Default 32; at most
	// PoolSize.
	MinIdleConns int `yaml:"min_idle_conns"`
}

// RedisSentinel names a master that Redis Sentinel watches over.
type RedisSentinel struct {
	// MasterName is the name the sentinels know the master by (required
	// with Addrs). Env EDGE_REDIS_SENTINEL_MASTER.
	MasterName string `yaml:"master_name"`
	// Addrs are sentinels' host:port. Env EDGE_REDIS_SENTINEL_ADDRS
	// (comma-separated).
	Addrs []string `yaml:"addrs"`
	// Username and Password authenticate to the sentinels when they require
	// it (Redis' own Username and Password are for the master). Env
	// EDGE_REDIS_SENTINEL_USERNAME, EDGE_REDIS_SENTINEL_PASSWORD.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// RedisTLS configures TLS to Redis. Setting any field but ServerName turns
// it on, as does a rediss:// address.
type RedisTLS struct {
	// Enabled turns TLS on with the system's roots. Env EDGE_REDIS_TLS=true.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle to verify the server with instead of the
	// system's roots. Env EDGE_REDIS_TLS_CA_FILE.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the server's certificate must carry, when it
	// is not the host of the address. Env EDGE_REDIS_TLS_SERVER_NAME.
	ServerName string `yaml:"server_name"`
	// CertFile and KeyFile, both or neither, are a client certificate for
	// servers that require one (tls-auth-clients). Env
	// EDGE_REDIS_TLS_CERT_FILE, EDGE_REDIS_TLS_KEY_FILE.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Operation is one row of the operation table: what the edge applies to
// one procedure.
type Operation struct {
	// Procedure is "/svc.v1.<Service>/<Method>"; it must be a method of the API.
	Procedure string `yaml:"procedure"`
	// ServiceAccountRoles: a service account needs one of them. People are
	// not checked here: the backend decides by organization membership.
	ServiceAccountRoles []string `yaml:"service_account_roles"`
	// Idempotent makes the edge honor Idempotency-Key (unary only).
	Idempotent bool `yaml:"idempotent"`
	// ReadOnly marks a procedure without side effects (the API declares it
	// idempotency_level NO_SIDE_EFFECTS): a call of it whose connection to
	// the backend breaks before the answer may be sent again. Only such a
	// procedure may be marked.
	ReadOnly bool `yaml:"read_only"`
	// RatePerMinute, when set, limits each subject's calls of this procedure
	// per minute (burst equal to the rate), on top of the plan's rate.
	RatePerMinute int `yaml:"rate_per_minute"`
	// ConcurrentStreams, when set, bounds each subject's open streams of
	// this streaming procedure.
	ConcurrentStreams int `yaml:"concurrent_streams"`
	// Quota: QuotaReserveEnvironment reserves environment and compute quota
	// before the call (CreateEnvironment only); QuotaReleaseEnvironment
	// releases it after (DeleteEnvironment only); empty: none.
	Quota string `yaml:"quota"`
	// Shadow makes RatePerMinute and ConcurrentStreams decide, count and set
	// headers and metrics without refusing anyone: an operator sees whom a
	// new limit would refuse before it does (docs/operations.md).
	Shadow bool `yaml:"shadow"`
}

// Values of Operation.Quota.
const (
	QuotaReserveEnvironment = "reserve_environment"
	QuotaReleaseEnvironment = "release_environment"
)

// Limits configures plan rates, per-operation limits, quotas, and what
// happens when Redis fails.
type Limits struct {
	// DefaultPlan is the plan of a subject whose token carries no known plan
	// claim (oidc.plan_claim) and who has no subject_plans entry. Default
	// "free".
	DefaultPlan string `yaml:"default_plan"`
	// Plans by name: lowercase identifiers. Default: the specification's
	// free, pro and enterprise. A plans map in the file replaces the default
	// plans whole (it does not add to them), and each plan it lists is
	// given whole: every field but shadow must be set (Unlimited is
	// written unlimited), so that a plan cut short by a half-written file
	// is refused instead of read as unlimited.
	Plans map[string]Plan `yaml:"plans"`
	// SubjectPlans overrides the plan of a subject (its token's sub), e.g.
	// for a contract. The design's order is: the token's plan claim, then
	// this override, then DefaultPlan; so an override applies only when the
	// token carries no plan claim naming a configured plan. See PlanFor.
	SubjectPlans map[string]string `yaml:"subject_plans"`
	// SubjectQuotas replace the plan's quotas for a subject, whole: every
	// field must be set (Pro and Enterprise quotas are "based on
	// subscription"). See QuotasFor.
	SubjectQuotas map[string]Quotas `yaml:"subject_quotas"`
	// StreamLease is how long a concurrent-stream lease lives without
	// renewal: a crashed edge's streams free themselves within it. Default
	// 30s; 3s to 10m.
	StreamLease time.Duration `yaml:"stream_lease"`
	// ReconcileInterval is how often the edge reconciles its records of
	// running environments with the backend (upstream.admin_url), so that
	// an environment deleted around the edge gives its quota back within
	// it. Default 1m; 1s to 1h.
	ReconcileInterval time.Duration `yaml:"reconcile_interval"`
	// EnvironmentSize is what one environment counts for compute quotas,
	// per hour of its lifetime. Default 2 vCPUs, 4 GB.
	EnvironmentSize EnvironmentSize `yaml:"environment_size"`
	// OnRedisFailure is FailOpen (default: each replica enforces its
	// LocalShare of every limit on its own) or FailClosed (calls get
	// unavailable). Env EDGE_ON_REDIS_FAILURE.
	OnRedisFailure FailureMode `yaml:"on_redis_failure"`
	// LocalShare is the fraction (0 < x ≤ 1) of each limit one replica
	// admits on its own while Redis is unreachable. Default 0.5 (two
	// replicas).
	LocalShare float64 `yaml:"local_share"`
}

// FailureMode is what a step does while Redis does not answer: the one
// name of that choice, for the limits, the quotas and idempotency alike.
type FailureMode string

// Values of FailureMode (limits.on_redis_failure,
// idempotency.on_redis_failure).
const (
	FailOpen   FailureMode = "fail_open"
	FailClosed FailureMode = "fail_closed"
)

// Plan is one plan's limits.
type Plan struct {
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// RequestsPerDay caps requests per UTC day; Unlimited: no daily cap.
	RequestsPerDay Count `yaml:"requests_per_day"`
	// Burst is the instantaneous capacity above the per-minute rate (GCRA
	// burst).
	Burst  int    `yaml:"burst"`
	Quotas Quotas `yaml:"quotas"`
	// Shadow makes the plan's rate and daily cap decide, count and set
	// headers and metrics without refusing anyone. Quotas stay enforced.
	// Default false; the one field of a plan the file may leave out.
	Shadow bool `yaml:"shadow" config:"optional"`
}

// Quotas bound environments and compute per calendar month (UTC);
// Unlimited is no bound.
type Quotas struct {
	ConcurrentEnvironments Count  `yaml:"concurrent_environments"`
	EnvironmentsPerMonth   Count  `yaml:"environments_per_month"`
	VCPUHoursPerMonth      Amount `yaml:"vcpu_hours_per_month"`
	MemoryGBHoursPerMonth  Amount `yaml:"memory_gb_hours_per_month"`
}

// EnvironmentSize is the size of one environment.
type EnvironmentSize struct {
	VCPUs    float64 `yaml:"vcpus"`
	MemoryGB float64 `yaml:"memory_gb"`
}

// Log configures logging.
type Log struct {
	// Format is json (default) or text. Env EDGE_LOG_FORMAT.
	Format string `yaml:"format"`
	// Level is debug, info (default), warn or error. Env EDGE_LOG_LEVEL.
	Level string `yaml:"level"`
	// SampleOK is the fraction (0 to 1) of successful calls whose access
	// line is written; calls with any other outcome always get theirs.
	// Default 0.1: a line for every call is about 26 GB a day per 1,000
	// calls/s (docs/operations.md, "Access log volume").
	SampleOK float64 `yaml:"sample_ok"`
	// CanceledPerSecond bounds the access lines of calls that their client
	// canceled before the answer (code canceled) to this many a second;
	// the others are counted (edge_access_lines_sampled_out_total), so that
	// a client resetting streams in a loop cannot flood the log. Default 10.
	CanceledPerSecond int `yaml:"canceled_per_second"`
	// BufferBytes bounds the log lines waiting to be written to stderr;
	// when stderr lags further behind, lines are dropped and counted
	// (edge_log_lines_dropped_total) instead of slowing calls down. Lines
	// buffered at shutdown are written. Default 4MiB.
	BufferBytes ByteSize `yaml:"buffer_bytes"`
}

// ByteSize is a size in bytes; in YAML an integer or a string with a unit:
// "4MiB", "64KiB", "1GiB", "512B" (also KB/MB/GB as powers of 1000).
type ByteSize int64

// Idempotency configures the replay of calls that carry Idempotency-Key, on
// operations whose row says idempotent.
type Idempotency struct {
	// TTL is how long a completed call's answer is replayed. Default 24h.
	TTL time.Duration `yaml:"ttl"`
	// Lease is how long a call in flight keeps its key when its edge dies:
	// duplicates get aborted meanwhile, a retry after it runs again.
	// Renewed while the backend works. Default 60s.
	Lease time.Duration `yaml:"lease"`
	// MaxResponseBytes bounds a stored answer; a larger one is not replayed
	// (duplicates get failed_precondition) and never runs twice. Default 1 MiB.
	MaxResponseBytes ByteSize `yaml:"max_response_bytes"`
	// MaxKeysPerSubject bounds the keys one subject holds at once (in
	// flight, or kept for the TTL): a new key past it is refused with
	// resource_exhausted until the oldest expires. Default 10000.
	MaxKeysPerSubject int `yaml:"max_keys_per_subject"`
	// OnRedisFailure is fail_closed (default: keyed calls get unavailable)
	// or fail_open (forwarded without idempotency).
	OnRedisFailure FailureMode `yaml:"on_redis_failure"`
}
