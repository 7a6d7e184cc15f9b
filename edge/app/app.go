// Package app is the edge's composition root: it builds every step from
// validated configuration, wires them into the chain (package edge), opens
// the API and admin listeners, reloads the live policy, and shuts down.
//
// It is not a step: nothing in the request chain imports it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/conns"
	"github.com/orgedge/edge/edge/cors"
	"github.com/orgedge/edge/edge/early"
	"github.com/orgedge/edge/edge/health"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/reconcile"
	"github.com/orgedge/edge/edge/topk"
	"github.com/orgedge/edge/edge/webtext"
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
	reconciler     *reconcile.Reconciler
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

// logsDropped is the log lines the LogWriter dropped, 0 without one.
func (o *options) logsDropped() uint64 {
	if o.logs == nil {
		return 0
	}
	return o.logs.Dropped()
}

// WithTracerProvider makes the edge's spans with tp instead of the global
// tracer provider (otel.GetTracerProvider), for example to keep them in
// memory in a test.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// New builds the edge from validated configuration. It contacts
// nothing: the issuer and Redis are reached on first use. Each piece is
// built from its part of the configuration by the function named for it;
// New only orders them and hands each the pieces it needs.
func New(cfg *config.Config, log *slog.Logger, version string, opts ...Option) (_ *App, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	a := &App{cfg: cfg, log: log, failed: make(chan error, 2)}
	verifier, err := newVerifier(cfg.OIDC)
	if err != nil {
		return nil, err
	}
	clientAddr, err := clientAddress(cfg.Listen.ClientAddress)
	if err != nil {
		return nil, err
	}
	reg := observe.NewRegistry()
	listener := observe.NewListenerMetrics(reg, func() int { return a.holds.Held() }, o.logsDropped)
	auth := newAuth(cfg, verifier, clientAddr, listener, log)
	if err := a.openRedis(cfg.Redis, reg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // every error from here on: the pool may be dialling already (redis.min_idle_conns)
			_ = a.redis.Close()
		}
	}()
	a.reloads = newReloadMetrics(reg)
	rates := newRates(cfg, a.redis, log)
	metrics := observe.NewMetrics(reg, auth, rates, version)
	metrics.SampleCanceledLines(cfg.Log.CanceledPerSecond)
	refusals := topk.New()
	step := a.newLimits(cfg, rates, reg, metrics, listener, refusals.Refused)
	observe.RegisterCaches(reg, auth, rates, step)
	idem := newIdempotency(cfg, a.redis, log)
	checks := a.readiness(cfg, verifier)
	a.health = health.New(health.Options{Checks: checks, MaxBytes: int64(cfg.Requests.MaxBodyBytes), ClientAddress: clientAddr.Of})
	pool, fwd, err := newForward(cfg, step, observe.NewTracing(o.tracerProvider), metrics, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			pool.Close() // its resolver and health checks
		}
	}()
	handler, err := edge.New(edge.Options{
		Config: cfg, Auth: auth, Procedures: procedures(), Logger: log, Limits: step, Idempotency: idem,
		Pool: pool, Forward: fwd, Builtins: builtins(cfg, a.health), Metrics: metrics, TracerProvider: o.tracerProvider,
	})
	if err != nil {
		return nil, err
	}
	a.edge = handler
	a.cors = cors.New(cfg.CORS, clientAddr)
	if err := a.newAPIServer(cfg, resetsOf(cfg.Listen, listener).Wrap(a.cors.Wrap(webtext.Wrap(handler))), clientAddr, listener); err != nil {
		return nil, err
	}
	var settle admin.SettleFunc
	if a.reconciler != nil {
		settle = a.reconciler.Settle
	}
	a.admin = newAdminServer(cfg.Admin, admin.Options{Gatherer: reg, Checks: checks, Limits: step, Auth: auth, Log: log,
		Addr: cfg.Admin.Addr, Settle: settle, Pprof: cfg.Admin.Pprof, Idempotency: idem,
		Dashboard: admin.Dashboard{Backends: handler.Backends, Refusals: refusals, Policy: a.PolicyLoad,
			RedisMode: redisMode(cfg.Redis), EjectFor: cfg.Upstream.EjectFor, PlanClaim: cfg.OIDC.PlanClaim, Version: version}})
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
