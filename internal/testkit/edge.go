package testkit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/edge/app"
	"github.com/orgedge/edge/internal/logformat"
	"github.com/orgedge/edge/internal/testenv"
)

// Edge is a running edge.
type Edge struct {
	URL      string // http(s)://127.0.0.1:port of the API listener
	AdminURL string
	App      *app.App
	Config   *config.Config
}

// EdgeConfig returns the default configuration for an edge in front of
// upstreamURL, verifying tokens from issuerURL, on free loopback ports, with
// the real redis-server (see testenv) under a key prefix of its own, so that
// no two edges of a test run share limits.
func EdgeConfig(t testing.TB, upstreamURL, issuerURL string) *config.Config {
	t.Helper()
	return EdgeConfigFrom(t, config.Default(), upstreamURL, issuerURL)
}

// EdgeConfigFrom is EdgeConfig on a configuration of the test's instead
// of the default: it sets the same fields and keeps the others.
func EdgeConfigFrom(t testing.TB, cfg *config.Config, upstreamURL, issuerURL string) *config.Config {
	t.Helper()
	cfg.Redis.Addr = testenv.RedisAddr(t)
	cfg.Redis.KeyPrefix = testenv.Unique("test") + ":"
	// A loaded CI machine running -race can take longer than the production
	// default (50ms) to answer; a missed deadline would open the breaker and
	// fail open, which tests of exact limits must not see. Outage tests
	// stop Redis, which fails fast whatever the deadline.
	cfg.Redis.Timeout = 2 * time.Second
	cfg.Listen.Addr, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Upstream.URL = upstreamURL
	// Health checks are calls too: a test's backend that counts what it
	// receives would count them. The tests of the checks turn them on.
	cfg.Upstream.HealthCheck.Interval = 0
	cfg.OIDC.IssuerURL = issuerURL
	cfg.OIDC.Audience = devissuer.DefaultAudience
	cfg.Listen.ShutdownGrace = 5 * time.Second
	// Every test client comes from loopback, many subjects at once: the
	// warning for a forgotten proxy setting would only be noise (its own
	// test turns it on).
	cfg.Listen.ClientAddress.WarnSubjectsPerAddress = 0
	// Tests read the access line of the call they made; production keeps
	// a sample of successful calls' lines (log.sample_ok).
	cfg.Log.SampleOK = 1
	return cfg
}

// StartEdge validates cfg and runs the edge with it, exactly as the edge
// command does, until the test ends. It logs nowhere and traces with the
// global tracer provider.
func StartEdge(t testing.TB, cfg *config.Config) *Edge {
	t.Helper()
	return StartEdgeWith(t, cfg, EdgeOptions{})
}

// EdgeOptions are what a test may change of how StartEdgeWith runs the edge.
type EdgeOptions struct {
	Logger         *slog.Logger         // default: discard (the edge's own logger onto io.Discard)
	TracerProvider trace.TracerProvider // default: the global one
}

// Logger is the edge's own logger (as the edge command makes it) writing
// format at level and above to w: the access line takes its path, not
// slog's.
func Logger(w io.Writer, format string, level slog.Level) *slog.Logger {
	log, err := logformat.New(w, format, level)
	if err != nil {
		panic(err) // a test's mistake: json or text
	}
	return log
}

// StartEdgeWith is StartEdge with a logger or tracer provider of the test's.
func StartEdgeWith(t testing.TB, cfg *config.Config, o EdgeOptions) *Edge {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("edge configuration: %v", err)
	}
	log := o.Logger
	if log == nil {
		log = Logger(io.Discard, "text", slog.LevelInfo)
	}
	var opts []app.Option
	if o.TracerProvider != nil {
		opts = append(opts, app.WithTracerProvider(o.TracerProvider))
	}
	app, err := app.New(cfg, log, "test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("edge shutdown: %v", err)
		}
		app.Close()
	})
	scheme := "http://"
	if cfg.Listen.TLS.CertFile != "" {
		scheme = "https://"
	}
	return &Edge{URL: scheme + app.APIAddr(), AdminURL: "http://" + app.AdminAddr(), App: app, Config: cfg}
}
