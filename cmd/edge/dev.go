//go:build !nodev

// The development mode (-dev) runs the backend, an issuer and an embedded
// Redis beside the edge. A build with the tag nodev (the production image,
// deploy/edge.Dockerfile) leaves this file out, and with it the backend,
// SQLite, pgx, the development issuer and miniredis: see nodev.go.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/internal/telemetry"
	"github.com/orgedge/edge/orgsvc"
)

// The development mode's addresses: a public contract (docs, examples and
// outside checks use them).
const (
	devAPIAddr     = "127.0.0.1:8080"
	devAdminAddr   = "127.0.0.1:9090"
	devIssuerAddr  = "127.0.0.1:8081"
	devBackendAddr = "127.0.0.1:8082"
	// devBackendAdminAddr serves the backend's /metrics, /healthz, /readyz.
	devBackendAdminAddr = "127.0.0.1:9092"
)

// embeddedRedisTimeout bounds each command to the embedded store. It runs
// every Lua script (each limit, quota and idempotency call is one) in an
// interpreter, one call at a time under one lock: a burst of a few dozen
// calls queues it far past production's 50ms, where a real Redis answers
// in well under a millisecond. An in-process store cannot be unreachable,
// so a deadline that long hides no outage.
const embeddedRedisTimeout = time.Second

// devStack is everything the development mode runs besides the edge.
type devStack struct {
	config  *config.Config
	issuer  *devissuer.Server
	backend *orgsvc.Running
	redis   *miniredis.Miniredis // nil when the developer names a Redis
	// redisLine is the banner's line for the Redis the edge uses.
	redisLine string
	dataDir   string
	tmpDir    string
	// stopTracing flushes the backend's spans (a tracer provider of its
	// own, so that they carry service.name orgsvc).
	stopTracing func(context.Context) error
}

func startDev(ctx context.Context, dataDir, version string) (*devStack, error) {
	d := &devStack{dataDir: dataDir}
	ok := false
	defer func() {
		if !ok {
			d.stop()
		}
	}()
	var err error
	// A page on any origin may fetch a token and call the API.
	issCfg := devissuer.DefaultConfig()
	issCfg.AllowAnyOrigin = true
	if d.issuer, err = devissuer.Start(devIssuerAddr, issCfg); err != nil {
		return nil, fmt.Errorf("development issuer on %s: %w", devIssuerAddr, err)
	}
	cfg := config.Default()
	cfg.Listen.Addr, cfg.Admin.Addr = devAPIAddr, devAdminAddr
	cfg.Admin.Pprof = true
	cfg.Upstream.URL = "http://" + devBackendAddr
	cfg.Upstream.AdminURL = "http://" + devBackendAdminAddr // reconciliation of quotas
	cfg.OIDC.IssuerURL = d.issuer.URL()
	// The development issuer's tokens name this audience (aud), as a
	// production issuer's audience mapper makes them.
	cfg.OIDC.Audience = devissuer.DefaultAudience
	cfg.Log.Format = "text"
	// A developer trying calls reads each one's line.
	cfg.Log.SampleOK = 1
	cfg.CORS.AllowedOrigins = []string{"*"}
	// Every development client comes from loopback: many subjects behind
	// one address is the norm here, not a forgotten proxy setting.
	cfg.Listen.ClientAddress.WarnSubjectsPerAddress = 0
	cfg.ApplyEnv(os.Getenv)
	if d.dataDir == "" {
		if d.tmpDir, err = os.MkdirTemp("", "edge-dev-"); err != nil {
			return nil, err
		}
		d.dataDir = d.tmpDir
	}
	var tp trace.TracerProvider
	if tp, d.stopTracing, err = telemetry.NewTracerProvider(ctx, "orgsvc", version); err != nil {
		return nil, err
	}
	if d.backend, err = orgsvc.Start(ctx, orgsvc.RunOptions{
		Addr: devBackendAddr, AdminAddr: devBackendAdminAddr, Database: filepath.Join(d.dataDir, "orgsvc.db"), IssuerURL: d.issuer.URL(),
		Audience: cfg.OIDC.Audience, AllowAnyAudience: cfg.OIDC.AllowAnyAudience, RoleClaims: cfg.OIDC.RoleClaims, Version: version, Config: orgsvc.Config{TracerProvider: tp},
	}); err != nil {
		return nil, fmt.Errorf("backend on %s: %w", devBackendAddr, err)
	}
	// The embedded store, unless the developer names a Redis of their own
	// (config.Default's 127.0.0.1:6379 is for production files, not here).
	switch {
	case os.Getenv("EDGE_REDIS_CLUSTER_ADDRS") != "":
		d.redisLine = strings.Join(cfg.Redis.ClusterAddrs, ",") + "   (Redis Cluster, from EDGE_REDIS_CLUSTER_ADDRS)"
	case os.Getenv("EDGE_REDIS_ADDR") != "":
		d.redisLine = cfg.Redis.Addr + "   (from EDGE_REDIS_ADDR)"
	default:
		d.redis = miniredis.NewMiniRedis()
		if err := d.redis.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		cfg.Redis.Addr, cfg.Redis.ClusterAddrs = d.redis.Addr(), nil
		cfg.Redis.Timeout = embeddedRedisTimeout
		d.redisLine = d.redis.Addr() + "   (embedded, in memory)"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}

	d.config = cfg
	ok = true
	return d, nil
}

func (d *devStack) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.backend != nil {
		_ = d.backend.Shutdown(ctx)
	}
	if d.stopTracing != nil {
		_ = d.stopTracing(ctx)
	}
	if d.issuer != nil {
		_ = d.issuer.Shutdown(ctx)
	}
	if d.redis != nil {
		d.redis.Close()
	}
	if d.tmpDir != "" {
		_ = os.RemoveAll(d.tmpDir)
	}
}

func (d *devStack) print(w io.Writer, api, admin string) {
	iss := d.issuer.URL()
	fmt.Fprintf(w, `
edge development mode: everything on loopback, in this process

  edge API       http://%[1]s   Connect, gRPC (h2c), gRPC-Web, HTTP/JSON
  admin          http://%[2]s   /healthz /readyz /metrics /dashboard/ (the operator page)
  issuer         %[3]s
  backend        http://%[4]s   (SQLite in %[5]s)
  backend admin  http://%[7]s   /healthz /readyz /metrics
  redis          %[6]s

Credentials (tokens live 10 minutes):
  client credentials  svc-admin, svc-env-manager, svc-viewer   secret dev-secret
  password grant      client cli: alice/alice (free), bob/bob (pro), carol/carol (enterprise)
                      any free-<x>, pro-<x>, enterprise-<x> with password dev

Log in as a person with the command-line client (device flow: open the
printed link, approve as alice/alice):
  go run ./cmd/orgctl login

Try:
  TOKEN=$(curl -s -d grant_type=password -d client_id=cli -d username=alice -d password=alice %[3]s/protocol/openid-connect/token | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"name":"acme","billingEmail":"billing@acme.example"}' http://%[1]s/svc.v1.OrganizationService/CreateOrganization

Ctrl-C stops everything.
`, api, admin, iss, d.backend.Addr, d.dataDir, d.redisLine, d.backend.AdminAddr)
}
