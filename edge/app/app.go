// Package app is the edge's composition root: it builds every step from
// validated configuration, wires them into the chain (package edge), opens
// the API and admin listeners, reloads the live policy, and shuts down.
//
// It is not a step: nothing in the request chain imports it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http2"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/conns"
	"github.com/orgedge/edge/edge/cors"
	"github.com/orgedge/edge/edge/early"
	"github.com/orgedge/edge/edge/health"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/reflection"
	"github.com/orgedge/edge/edge/topk"
	"github.com/orgedge/edge/edge/webtext"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/certfile"
)

// App is a running edge: its API and admin listeners and what they share.
type App struct {
	cfg                *config.Config
	log                *slog.Logger
	api, admin         *http.Server
	apiAddr, adminAddr string
	redis              redis.UniversalClient
	edge               *edge.Server
	failed             chan error
	connBounds         conns.Options
	reloadState
	// certs are the TLS certificates read from files, reloaded with the
	// configuration file (reloadCerts).
	certs          []namedCert
	reconciler     *limits.Reconciler
	holds          *early.Holds
	health         *health.Service
	stopBackground context.CancelFunc
}

// Option changes how New builds the edge.
type Option func(*options)

type options struct {
	tracerProvider trace.TracerProvider
	logs           *observe.LogWriter
}

// WithLogWriter exports the drops of the LogWriter the logger writes to, as
// edge_log_lines_dropped_total.
func WithLogWriter(w *observe.LogWriter) Option {
	return func(o *options) { o.logs = w }
}

// WithTracerProvider makes the edge's spans with tp instead of the global
// tracer provider (otel.GetTracerProvider), for example to keep them in
// memory in a test.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// New builds the edge from validated configuration. It contacts
// nothing: the issuer and Redis are reached on first use.
func New(cfg *config.Config, log *slog.Logger, version string, opts ...Option) (_ *App, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	verifier, err := identity.NewVerifier(identity.Config{
		IssuerURL: cfg.OIDC.IssuerURL, Audience: cfg.OIDC.Audience, ClockSkew: cfg.OIDC.ClockSkew,
		AllowAnyAudience: cfg.OIDC.AllowAnyAudience, AzpAsAudience: cfg.OIDC.AzpAsAudience,
		RoleClaims: cfg.OIDC.RoleClaims, PlanClaim: cfg.OIDC.PlanClaim, HTTPTimeout: cfg.OIDC.HTTPTimeout,
		KeyRefetchInterval: cfg.OIDC.KeyRefetchInterval,
	})
	if err != nil {
		return nil, err
	}
	clientAddr := authn.ClientAddress{Header: cfg.Listen.ClientAddress.Header}
	for _, tp := range cfg.Listen.ClientAddress.TrustedProxies {
		pfx, err := config.ParsePrefix(tp)
		if err != nil {
			return nil, fmt.Errorf("listen.client_address.trusted_proxies: %w", err)
		}
		clientAddr.TrustedProxies = append(clientAddr.TrustedProxies, pfx)
	}
	reg := prometheus.NewRegistry()
	var holds *early.Holds // nil until built below: Held is safe on nil
	listener := observe.NewListenerMetrics(reg, func() int { return holds.Held() }, func() uint64 {
		if o.logs == nil {
			return 0
		}
		return o.logs.Dropped()
	})
	auth := authn.New(verifier, authn.Options{
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

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	procs := classify.Procedures{}
	for name, info := range config.Procedures() {
		procs[name] = info.Streaming()
	}
	for name, info := range config.BuiltinProcedures {
		procs[name] = info.Streaming()
	}
	a := &App{cfg: cfg, log: log, failed: make(chan error, 2)}
	var redisCert *certfile.Pair
	if a.redis, redisCert, err = newRedisClient(cfg.Redis); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // every error from here on: the pool may be dialling already (redis.min_idle_conns)
			_ = a.redis.Close()
		}
	}()
	if redisCert != nil {
		a.certs = append(a.certs, namedCert{"redis.tls", redisCert})
	}
	a.redis.AddHook(observe.NewRedisHook(reg, cfg.Redis.KeyPrefix))
	a.reloads = newReloadMetrics(reg)
	// Each step's deadline for one Redis call covers the wait for a
	// connection and the command's write and read; the client enforces
	// the command's own bound (redis.timeout) inside it.
	callTimeout := cfg.Redis.PoolTimeout + 2*cfg.Redis.Timeout
	rates := ratelimit.New(a.redis, ratelimit.Options{
		Timeout: callTimeout, OnRedisFailure: cfg.Limits.OnRedisFailure, LocalShare: cfg.Limits.LocalShare, Logger: log, KeyPrefix: cfg.Redis.KeyPrefix,
	})
	quotas := quota.Options{KeyPrefix: cfg.Redis.KeyPrefix, Timeout: callTimeout, Logger: log, LeasePeriod: cfg.Limits.StreamLease}
	envs := quota.NewEnvironments(a.redis, quotas)
	streamOpts := quotas
	streamOpts.Renewals = observe.NewLeaseRenewals(reg)
	metrics := observe.NewMetrics(reg, auth, rates, version)
	metrics.SampleCanceledLines(cfg.Log.CanceledPerSecond)
	if cfg.Upstream.AdminURL != "" {
		a.reconciler = limits.NewReconciler(envs, cfg.Upstream.AdminURL, cfg.Limits.ReconcileInterval, log)
	}
	holds = early.New(early.Options{Max: cfg.Listen.MaxEarlyCalls, MaxHold: cfg.Listen.MaxEarlyCallHold,
		MaxHeld: cfg.Listen.MaxHeldCallsPerSubject, OnHold: listener.Held})
	a.holds = holds
	refusals := topk.New()
	step := limits.New(policy.NewLive(cfg), limits.Options{
		Early:          holds,
		Rates:          rates,
		Streams:        quota.NewStreams(a.redis, streamOpts),
		Envs:           envs,
		OnRedisFailure: cfg.Limits.OnRedisFailure,
		Reconciler:     a.reconciler,
		Log:            log,
		Observer:       metrics,
		Refused:        refusals.Refused,
	})
	a.limits = step
	a.policyLoad.Store(&admin.PolicyLoad{LoadedAt: time.Now()})
	observe.RegisterCaches(reg, auth, rates, step)
	idem := idempotency.New(a.redis, idempotency.Options{
		TTL: cfg.Idempotency.TTL, Lease: cfg.Idempotency.Lease, MaxResponseBytes: int(cfg.Idempotency.MaxResponseBytes), MaxKeysPerSubject: cfg.Idempotency.MaxKeysPerSubject,
		MaxRequestBytes: int64(cfg.Requests.MaxBodyBytes), Timeout: callTimeout,
		OnRedisFailure: cfg.Idempotency.OnRedisFailure, Logger: log, KeyPrefix: cfg.Redis.KeyPrefix,
	})
	var settle admin.SettleFunc
	if a.reconciler != nil {
		settle = a.reconciler.Settle
	}
	reflect := reflection.New(reflection.Options{Timeout: cfg.Requests.MaxUnaryTimeout, MaxBytes: int64(cfg.Requests.MaxBodyBytes)})
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
	a.health = health.New(health.Options{Checks: checks, MaxBytes: int64(cfg.Requests.MaxBodyBytes), ClientAddress: clientAddr.Of})
	builtins := map[string]http.Handler{}
	for name, info := range config.BuiltinProcedures {
		builtins[name] = reflect
		if info.Service == config.HealthService {
			builtins[name] = a.health
		}
	}
	handler, err := edge.New(edge.Options{
		Config: cfg, Auth: auth, Procedures: procs, Logger: log, Limits: step, Idempotency: idem, Builtins: builtins,
		Metrics:        metrics,
		TracerProvider: o.tracerProvider,
	})
	if err != nil {
		return nil, err
	}
	a.edge = handler
	a.cors = cors.New(cfg.CORS, clientAddr)

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg.Listen.TLS.CertFile != "" {
		protocols.SetHTTP2(true) // ALPN h2
	} else {
		protocols.SetUnencryptedHTTP2(true) // h2c: gRPC without TLS
	}
	exempt := cfg.Listen.ConnectionBoundExempt
	if exempt == nil {
		exempt = cfg.Listen.ClientAddress.TrustedProxies
	}
	a.connBounds = conns.Options{PerAddress: cfg.Listen.MaxConnectionsPerAddress,
		ReadHeaderTimeout: cfg.Listen.ReadHeaderTimeout,
		OnRefused:         listener.RefusedAtAccept}
	if cfg.Listen.ClientAddress.ProxyProtocol {
		a.connBounds.ProxyProtocol = clientAddr.TrustedProxies
	}
	for _, e := range exempt {
		pfx, err := config.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("listen.connection_bound_exempt: %w", err)
		}
		a.connBounds.Exempt = append(a.connBounds.Exempt, pfx)
	}
	resets := conns.Resets{Max: cfg.Listen.MaxResetsPerConnection, OnClose: listener.ClosedForResets}
	var apiTLS *tls.Config
	if cfg.Listen.TLS.CertFile != "" {
		pair, err := certfile.Load(cfg.Listen.TLS.CertFile, cfg.Listen.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("listen.tls: %w", err)
		}
		a.certs = append(a.certs, namedCert{"listen.tls", pair})
		// Read at each handshake: a rotated certificate is served to the
		// next connection (see reloadCerts), open ones keep theirs.
		apiTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	}
	a.api = &http.Server{
		TLSConfig:         apiTLS,
		Addr:              cfg.Listen.Addr,
		Handler:           resets.Wrap(a.cors.Wrap(webtext.Wrap(handler))),
		ConnContext:       conns.ConnContext,
		Protocols:         &protocols,
		ReadHeaderTimeout: cfg.Listen.ReadHeaderTimeout,
		IdleTimeout:       cfg.Listen.IdleTimeout,
		MaxHeaderBytes:    int(cfg.Listen.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No read or write timeout: streams are long. Every call has a
		// deadline of its own (requests.max_*_timeout).
	}
	// x/net's HTTP/2 server instead of net/http's copy of it: the same
	// code, but its idle timeout can be shorter than HTTP/1.1's. It runs
	// from a connection's start, so it also cuts one that never completes
	// a request's headers. x/net deprecates it for http.Server's settings,
	// but net/http's HTTP2Config has no idle timeout of HTTP/2's own (Go
	// 1.27's x/net still honors this one, wrapping net/http).
	//lint:ignore SA1019 no HTTP/2-only idle timeout in net/http (see above)
	h2 := &http2.Server{IdleTimeout: cfg.Listen.HTTP2IdleTimeout, CountError: listener.HTTP2Error}
	//lint:ignore SA1019 as above
	if err := http2.ConfigureServer(a.api, h2); err != nil {
		return nil, fmt.Errorf("http2: %w", err)
	}
	a.admin = &http.Server{
		Addr: cfg.Admin.Addr,
		Handler: admin.New(admin.Options{Gatherer: reg, Checks: checks, Limits: step, Auth: auth, Log: log,
			Addr: cfg.Admin.Addr, Settle: settle, Pprof: cfg.Admin.Pprof, Idempotency: idem,
			Dashboard: admin.Dashboard{Backends: handler.Backends, Refusals: refusals, Policy: a.PolicyLoad,
				RedisMode: redisMode(cfg.Redis), EjectFor: cfg.Upstream.EjectFor, PlanClaim: cfg.OIDC.PlanClaim, Version: version}}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
	}
	return a, nil
}

// Listen opens the Redis pool's idle connections (best effort, for at
// most redis.pool_timeout), then binds both listeners and serves them in
// the background.
func (a *App) Listen() error {
	a.warmRedis()
	ln, err := net.Listen("tcp", a.api.Addr)
	if err != nil {
		return fmt.Errorf("listen.addr: %w", err)
	}
	apiLn := conns.Listen(ln, a.connBounds)
	adminLn, err := net.Listen("tcp", a.admin.Addr)
	if err != nil {
		_ = apiLn.Close()
		return fmt.Errorf("admin.addr: %w", err)
	}
	a.apiAddr, a.adminAddr = apiLn.Addr().String(), adminLn.Addr().String()
	go func() {
		var err error
		if a.cfg.Listen.TLS.CertFile != "" {
			// The certificate comes from TLSConfig (GetCertificate). Not
			// "TLSConfig != nil": http2.ConfigureServer sets one anyway.
			err = a.api.ServeTLS(apiLn, "", "")
		} else {
			err = a.api.Serve(apiLn)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			a.failed <- fmt.Errorf("api listener: %w", err)
		}
	}()
	go func() {
		if err := a.admin.Serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
			a.failed <- fmt.Errorf("admin listener: %w", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	a.stopBackground = cancel
	if a.reconciler != nil {
		go a.reconciler.Run(ctx)
	} else {
		a.log.Warn("upstream.admin_url is not set: environment quotas are not reconciled with the backend, so an environment deleted around the edge keeps its slot")
	}
	return nil
}

// warmRedis opens redis.min_idle_conns connections to each node before the
// first call, so that a burst on a fresh edge finds them ready. A Redis
// that does not answer is no reason not to start (fail_open serves without
// it): the calls' own failures then decide.
func (a *App) warmRedis() {
	n := a.cfg.Redis.MinIdleConns
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Redis.PoolTimeout)
	defer cancel()
	// n concurrent pings hold n connections at once: the pool dials them.
	warm := func(ctx context.Context, c redis.Cmdable) error {
		errs := make(chan error, n)
		for range n {
			go func() { errs <- c.Ping(ctx).Err() }()
		}
		var err error
		for range n {
			err = errors.Join(err, <-errs)
		}
		return err
	}
	var err error
	if cc, ok := a.redis.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return warm(ctx, c) })
	} else {
		err = warm(ctx, a.redis)
	}
	if err != nil {
		a.log.Warn("redis: could not open the idle connections at start; calls will dial", "err", err)
	}
}

// Shutdown stops accepting calls, ends open streams at once with
// unavailable (their clients reconnect to another replica; waiting would
// only have them cut at the end of the grace), and waits for the unary
// calls in flight until ctx ends; the admin listener goes last so that
// probes see the drain.
func (a *App) Shutdown(ctx context.Context) error {
	if a.stopBackground != nil {
		a.stopBackground()
	}
	// Held calls are decided now: a hold must not outlast the drain.
	a.holds.Stop()
	a.edge.EndStreams()
	a.health.EndWatches()
	err := a.api.Shutdown(ctx)
	return errors.Join(err, a.admin.Shutdown(ctx))
}

// Close releases what Shutdown leaves: connections to Redis and the
// backends.
func (a *App) Close() {
	if a.stopBackground != nil {
		a.stopBackground()
	}
	if a.edge != nil {
		a.edge.Close()
	}
	if a.redis != nil {
		_ = a.redis.Close()
	}
}

// APIAddr and AdminAddr are the bound addresses, after Listen.
func (a *App) APIAddr() string   { return a.apiAddr }
func (a *App) AdminAddr() string { return a.adminAddr }

// Failed receives an error if a listener stops on its own.
func (a *App) Failed() <-chan error { return a.failed }
