package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/early"
	"github.com/orgedge/edge/edge/forward"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/reconcile"
	"github.com/orgedge/edge/edge/reflection"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// The pieces New orders, each built from its part of the configuration.
// The steps' own packages take no config where the import table keeps
// them free of it (authn, quota, early, conns); these functions are where
// config meets them.

// newVerifier verifies tokens as oidc says.
func newVerifier(c config.OIDC) (*identity.Verifier, error) {
	return identity.NewVerifier(identity.Config{
		IssuerURL: c.IssuerURL, Audience: c.Audience, ClockSkew: c.ClockSkew,
		AllowAnyAudience: c.AllowAnyAudience, AzpAsAudience: c.AzpAsAudience,
		RoleClaims: c.RoleClaims, PlanClaim: c.PlanClaim, HTTPTimeout: c.HTTPTimeout,
		KeyRefetchInterval: c.KeyRefetchInterval,
	})
}

// clientAddress is who a call comes from, as listen.client_address says.
func clientAddress(c config.ClientAddress) (authn.ClientAddress, error) {
	addr := authn.ClientAddress{Header: c.Header}
	for _, tp := range c.TrustedProxies {
		pfx, err := config.ParsePrefix(tp)
		if err != nil {
			return authn.ClientAddress{}, fmt.Errorf("listen.client_address.trusted_proxies: %w", err)
		}
		addr.TrustedProxies = append(addr.TrustedProxies, pfx)
	}
	return addr, nil
}

// newAuth is the authentication step (oidc): the token caches, the bound
// on failed authentications per address, and the warning about an address
// that carries many subjects.
func newAuth(cfg *config.Config, verifier *identity.Verifier, clientAddr authn.ClientAddress, listener *observe.ListenerMetrics, log *slog.Logger) *authn.Authenticator {
	return authn.New(verifier, authn.Options{
		CacheSize:     cfg.OIDC.TokenCacheSize,
		ClockSkew:     cfg.OIDC.ClockSkew,
		RefusedCache:  cfg.OIDC.RefusedTokenCacheSize,
		FailureLimit:  authn.FailureLimit{PerMinute: cfg.OIDC.FailureLimit.PerMinute, Burst: cfg.OIDC.FailureLimit.Burst},
		ClientAddress: clientAddr,
		SharedAddress: authn.SharedAddress{Subjects: cfg.Listen.ClientAddress.WarnSubjectsPerAddress,
			Found: func(addr netip.Addr, subjects int) {
				listener.SharedAddress()
				log.Warn("tokens of many subjects come from one client address: if it is a proxy or load balancer, name it in listen.client_address (trusted_proxies, with proxy_protocol or header), or every bound kept per address is shared by all its clients (docs/operations.md, \"Behind a proxy or load balancer\")",
					"client_address", addr.String(), "subjects", subjects)
			}},
	})
}

// openRedis makes the Redis client (redis), counted by observe's hook. It
// dials nothing unless redis.min_idle_conns asks: the caller closes it on
// any later error.
func (a *App) openRedis(c config.Redis, reg prometheus.Registerer) error {
	rdb, cert, err := newRedisClient(c)
	if err != nil {
		return err
	}
	a.redis = rdb
	if cert != nil {
		a.certs = append(a.certs, namedCert{"redis.tls", cert})
	}
	a.redis.AddHook(observe.NewRedisHook(reg, c.KeyPrefix))
	return nil
}

// callTimeout is each step's deadline for one Redis call: the wait for a
// connection and the command's write and read; the client enforces the
// command's own bound (redis.timeout) inside it.
func callTimeout(c config.Redis) time.Duration { return c.PoolTimeout + 2*c.Timeout }

// newRates is the rate limiter (limits.on_redis_failure, limits.local_share).
func newRates(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) *ratelimit.Limiter {
	return ratelimit.New(rdb, ratelimit.Options{
		Timeout: callTimeout(cfg.Redis), OnRedisFailure: cfg.Limits.OnRedisFailure, LocalShare: cfg.Limits.LocalShare, Logger: log, KeyPrefix: cfg.Redis.KeyPrefix,
	})
}

// newLimits is the limit step (limits) and what it holds: the stream
// leases, the environment quotas and their reconciler (upstream.admin_url),
// the early holds (listen.max_early_*); a reload swaps its policy.
func (a *App) newLimits(cfg *config.Config, rates *ratelimit.Limiter, reg prometheus.Registerer, metrics *observe.Metrics, listener *observe.ListenerMetrics, refused func(subject, plan, limit string)) *limits.Step {
	quotas := quota.Options{KeyPrefix: cfg.Redis.KeyPrefix, Timeout: callTimeout(cfg.Redis), Logger: a.log, LeasePeriod: cfg.Limits.StreamLease}
	envs := quota.NewEnvironments(a.redis, quotas)
	streamOpts := quotas
	streamOpts.Renewals = observe.NewLeaseRenewals(reg)
	if cfg.Upstream.AdminURL != "" {
		a.reconciler = reconcile.New(envs, cfg.Upstream.AdminURL, cfg.Limits.ReconcileInterval, a.log)
		a.reconciler.Observer = metrics
	}
	a.holds = early.New(early.Options{Max: cfg.Listen.MaxEarlyCalls, MaxHold: cfg.Listen.MaxEarlyCallHold,
		MaxHeld: cfg.Listen.MaxHeldCallsPerSubject, OnHold: listener.Held})
	step := limits.New(policy.NewLive(cfg), limits.Options{
		Early:          a.holds,
		Rates:          rates,
		Streams:        quota.NewStreams(a.redis, streamOpts),
		Envs:           envs,
		OnRedisFailure: cfg.Limits.OnRedisFailure,
		Reconciler:     a.reconciler,
		Log:            a.log,
		Observer:       metrics,
		Refused:        refused,
	})
	a.limits = step
	if a.reconciler != nil {
		a.reconciler.Size = func() quota.Size { return quota.Size(step.Live().Limits.EnvironmentSize) }
	}
	a.policyLoad.Store(&admin.PolicyLoad{LoadedAt: time.Now()})
	return step
}

// newIdempotency is the Idempotency-Key step (idempotency, requests).
func newIdempotency(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) *idempotency.Step {
	return idempotency.New(rdb, idempotency.Options{
		TTL: cfg.Idempotency.TTL, Lease: cfg.Idempotency.Lease, MaxResponseBytes: int(cfg.Idempotency.MaxResponseBytes), MaxKeysPerSubject: cfg.Idempotency.MaxKeysPerSubject,
		MaxRequestBytes: int64(cfg.Requests.MaxBodyBytes), Timeout: callTimeout(cfg.Redis),
		OnRedisFailure: cfg.Idempotency.OnRedisFailure, Logger: log, KeyPrefix: cfg.Redis.KeyPrefix,
	})
}

// readiness is what /readyz and gRPC's health service check.
func (a *App) readiness(cfg *config.Config, verifier *identity.Verifier) []admin.Check {
	checks := []admin.Check{{Name: "issuer", Func: verifier.Ready}}
	if cfg.Limits.OnRedisFailure == config.FailClosed {
		// Under fail_closed a replica that cannot reach Redis refuses every
		// call: let the load balancer prefer one that can. Under fail_open it
		// serves on its local share, and all replicas share one Redis:
		// following it would empty the Service in an outage (or a long
		// fork) that the edge was configured to ride out. Redis' health is
		// then in the metrics and alerts (docs/operations.md).
		checks = append(checks, admin.Check{Name: "redis", Func: func(ctx context.Context) error { return a.redis.Ping(ctx).Err() }})
	}
	return checks
}

// procedures are the API's procedures and the edge's own, for classify.
func procedures() wire.Procedures {
	procs := wire.Procedures{}
	for name, info := range config.Procedures() {
		procs[name] = info.Streaming()
	}
	for name, info := range config.BuiltinProcedures {
		procs[name] = info.Streaming()
	}
	return procs
}

// builtins answer the edge's own procedures: gRPC's health service from
// hs, reflection from the compiled descriptors.
func builtins(cfg *config.Config, hs http.Handler) map[string]http.Handler {
	reflect := reflection.New(reflection.Options{Timeout: cfg.Requests.MaxUnaryTimeout, MaxBytes: int64(cfg.Requests.MaxBodyBytes)})
	out := map[string]http.Handler{}
	for name, info := range config.BuiltinProcedures {
		out[name] = reflect
		if info.Service == config.HealthService {
			out[name] = hs
		}
	}
	return out
}

// newForward builds the pool of backends from upstream, and the forward
// step over it. The pool and the step name this edge alike in the Via of
// what they forward (proxy.NewPseudonym), so that a call that comes back
// is refused (forward.Step.Loop).
func newForward(cfg *config.Config, step *limits.Step, tracing observe.Tracing, metrics *observe.Metrics, log *slog.Logger) (*proxy.Pool, *forward.Step, error) {
	var ups []*url.URL
	for _, raw := range cfg.Upstream.Backends() {
		up, err := url.Parse(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("upstream: %w", err)
		}
		ups = append(ups, up)
	}
	uc, pseudonym := cfg.Upstream, proxy.NewPseudonym()
	pool := proxy.NewPool(proxy.PoolOptions{
		Upstreams: ups, DialTimeout: uc.DialTimeout, ResolveInterval: uc.ResolveInterval,
		MaxConnAge: uc.MaxConnectionAge, EjectFor: uc.EjectFor, Logger: log,
		HealthCheck: proxy.HealthCheck(uc.HealthCheck), Observer: metrics.Backends(),
		// gRPC needs HTTP/2 for its trailers; a stream is long-lived, and
		// h2c carries it whatever its protocol.
		HTTP2: func(r *http.Request) bool {
			c := call.Of(r).Call
			return c.Protocol == wire.GRPC || c.Streaming
		},
		ReadOnly:  func(r *http.Request) bool { return call.Of(r).ReadOnly },
		Pseudonym: pseudonym,
	})
	fwd := forward.New(forward.Options{
		Upstream:           ups[0],
		Transport:          pool,
		Tracing:            tracing,
		Metrics:            metrics,
		Limits:             step,
		Logger:             log,
		StreamWriteTimeout: cfg.Requests.StreamWriteTimeout,
		Pseudonym:          pseudonym,
	})
	return pool, fwd, nil
}
