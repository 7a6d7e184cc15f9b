// Command edge runs the API edge in front of the backend.
//
//	edge -config /etc/edge/edge.yaml     # production: a YAML file, secrets from EDGE_* variables
//	edge -check-config /etc/edge/edge.yaml
//	edge -check-config -print /etc/edge/edge.yaml   # the effective configuration, secrets redacted
//	edge -version
//	edge -dev                            # the whole stack in one process, on loopback
//
// Traces go over OTLP when the standard OTEL_* variables configure an
// exporter (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER=otlp, …); they
// are off otherwise. See docs/edge.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/app"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/internal/healthcheck"
	"github.com/orgedge/edge/internal/logformat"
	"github.com/orgedge/edge/internal/telemetry"
)

func main() {
	tuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

// defaultGCPercent is the garbage collector's target unless GOGC says
// otherwise. The edge's live heap is small (about 10 MB at 12,000 calls/s)
// while it allocates for every call, so Go's default of 100 collects many
// times a second; at 400 the heap peaks near five times the live heap and
// the collector runs far less often (docs/operations.md, "Memory").
const defaultGCPercent = 400

// tuneGC sets the collector's target to defaultGCPercent when the GOGC
// environment variable is not set. GOMEMLIMIT, when set, still bounds the
// heap: the collector works harder as the heap nears it, whatever GOGC.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// gcPercent is the collector's current target, read without changing it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// run runs the edge until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	var (
		configFile = fs.String("config", os.Getenv("EDGE_CONFIG"), "YAML configuration file ($EDGE_CONFIG)")
		check      = fs.String("check-config", "", "validate this configuration file (with EDGE_* overrides) and exit")
		printCfg   = fs.Bool("print", false, "with -check-config: print the effective configuration (defaults, file, EDGE_* overrides; secrets redacted)")
		showVer    = fs.Bool("version", false, "print the version and exit")
		health     = fs.String("healthcheck", "", "probe this URL (e.g. http://127.0.0.1:9090/readyz) and exit 0 if it answers 200: a container health check")
		dev        = fs.Bool("dev", false, "development mode: run the backend, an issuer and an embedded Redis too, on loopback")
		dataDir    = fs.String("data", "", "with -dev: directory for the backend's SQLite file (default: a new temporary directory)")
		reloadPoll = fs.Duration("reload-interval", 5*time.Second, "check the -config file this often and reload its policy when its content changes (0: only on SIGHUP)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVer {
		fmt.Fprintf(stdout, "edge %s\n", version())
		return nil
	}
	if *health != "" {
		return healthcheck.Check(*health)
	}
	if *check == "-print" && fs.NArg() == 1 {
		// "-check-config -print FILE": -print was taken for the file.
		*check, *printCfg = fs.Arg(0), true
	}
	if *check != "" {
		cfg, err := config.Load(*check)
		if err != nil {
			return err
		}
		if *printCfg {
			// String redacts the secrets (redis.password, redis.sentinel.password).
			fmt.Fprintf(stdout, "# %s: ok; the effective configuration, secrets redacted:\n%s", *check, cfg)
			return nil
		}
		fmt.Fprintf(stdout, "%s: ok\n", *check)
		return nil
	}

	tracing, shutdownTracing, err := telemetry.Setup(ctx, "edge", version())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(ctx)
	}()

	var (
		cfg *config.Config
		env *devStack
	)
	if *dev {
		if env, err = startDev(ctx, *dataDir, version()); err != nil {
			return err
		}
		defer env.stop()
		cfg = env.config
	} else {
		if *configFile == "" {
			return errors.New("-config (or EDGE_CONFIG) is required; to try the edge out, use -dev")
		}
		if cfg, err = config.Load(*configFile); err != nil {
			return err
		}
	}
	// Log lines leave the request path: a goroutine writes them to stderr.
	// Deferred first, so that it runs last and writes every line.
	logs := observe.NewLogWriter(os.Stderr, int(cfg.Log.BufferBytes))
	defer logs.Close()
	log, err := newLogger(cfg.Log, logs)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	// go-redis writes its own lines (failed dials, Sentinel's changes of
	// master) to stderr in plain text: into the structured log instead,
	// a few a minute at most.
	redis.SetLogger(observe.NewRedisLog(log, 0, 0))

	app, err := app.New(cfg, log, version(), app.WithLogWriter(logs), app.WithTracerProvider(tracing))
	if err != nil {
		return err
	}
	defer app.Close()
	if env == nil {
		// SIGHUP and a change of the file reload the policy (plans,
		// quotas, the operation table); see docs/operations.md. Caught
		// before the listeners open, so that a SIGHUP sent once the edge
		// answers never ends it.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go app.WatchConfig(watchCtx, *configFile, *reloadPoll, hup)
	}
	if err := app.Listen(); err != nil {
		return err
	}
	log.Info("edge listening", "api", app.APIAddr(), "admin", app.AdminAddr(), "upstream", cfg.Upstream.URL, "issuer", cfg.OIDC.IssuerURL, "tls", cfg.Listen.TLS.CertFile != "", "gogc", gcPercent())
	if env != nil {
		env.print(stdout, app.APIAddr(), app.AdminAddr())
	}

	select {
	case err := <-app.Failed():
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining open calls", "grace", cfg.Listen.ShutdownGrace)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.Listen.ShutdownGrace)
	defer cancel()
	return app.Shutdown(shutdownCtx)
}

func newLogger(c config.Log, out io.Writer) (*slog.Logger, error) {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	return logformat.New(out, c.Format, level)
}

// buildVersion is set at build time, as the Dockerfile does:
//
//	go build -ldflags "-X main.buildVersion=v1.2.3" ./cmd/edge
var buildVersion string

// version names this build: buildVersion if set, else the module version Go
// recorded (a tagged `go install`), else "devel".
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
