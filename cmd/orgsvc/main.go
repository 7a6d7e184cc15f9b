// Command orgsvc runs the backend: OrganizationService, EnvironmentService and
// BlueprintService over Connect, gRPC, gRPC-Web and HTTP/JSON.
//
//	orgsvc -issuer https://keycloak.example.com/realms/prod -audience api -database postgres://…
//	orgsvc -dev     # with a development issuer and SQLite in a temporary directory
//
// Every flag has an environment variable (ORGSVC_ADDR, ORGSVC_DATABASE,
// ORGSVC_ISSUER_URL, ORGSVC_AUDIENCE, …) that sets its default; secrets such as
// the database password belong in the variable, not on the command line.
//
// Prometheus metrics, /healthz and /readyz (storage answers, tokens can be
// verified) are served on a listener of their own, -admin-addr. Traces go over OTLP when the standard
// OTEL_* variables configure an exporter (OTEL_EXPORTER_OTLP_ENDPOINT, …);
// they are off otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/healthcheck"
	"github.com/orgedge/edge/internal/logformat"
	"github.com/orgedge/edge/internal/telemetry"
	"github.com/orgedge/edge/orgsvc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orgsvc:", err)
		os.Exit(1)
	}
}

// env returns the environment variable's value, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// boolEnv reads a true/false variable; unset or unreadable is false.
func boolEnv(name string) bool {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orgsvc: ignoring %s=%q: not true or false\n", name, v)
	}
	return b
}

func intEnv(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "orgsvc: ignoring %s=%q: not a whole number\n", name, v)
	}
	return def
}

func durationEnv(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "orgsvc: ignoring %s=%q: not a duration\n", name, v)
	}
	return def
}

func run(args []string) error {
	fs := flag.NewFlagSet("orgsvc", flag.ContinueOnError)
	var (
		addr      = fs.String("addr", env("ORGSVC_ADDR", "127.0.0.1:8082"), "listen address ($ORGSVC_ADDR)")
		adminAddr = fs.String("admin-addr", env("ORGSVC_ADMIN_ADDR", "127.0.0.1:9092"), "admin listen address: /metrics, /healthz, /readyz ($ORGSVC_ADMIN_ADDR)")
		database  = fs.String("database", env("ORGSVC_DATABASE", ""), "postgres:// DSN, or a SQLite file path ($ORGSVC_DATABASE)")
		dbConns   = fs.Int("db-max-conns", intEnv("ORGSVC_DB_MAX_CONNS", 0), "bound on open database connections; 0: 8 for SQLite, 16 for PostgreSQL ($ORGSVC_DB_MAX_CONNS)")
		issuer    = fs.String("issuer", env("ORGSVC_ISSUER_URL", ""), "OIDC issuer URL ($ORGSVC_ISSUER_URL)")
		audience  = fs.String("audience", env("ORGSVC_AUDIENCE", ""), "the API's client id at the issuer, which every token must name in aud; required unless -allow-any-audience ($ORGSVC_AUDIENCE)")
		anyAud    = fs.Bool("allow-any-audience", boolEnv("ORGSVC_ALLOW_ANY_AUDIENCE"), "accept tokens minted for any client of the issuer: development only ($ORGSVC_ALLOW_ANY_AUDIENCE)")
		azpAud    = fs.Bool("azp-as-audience", boolEnv("ORGSVC_AZP_AS_AUDIENCE"), "also accept a token whose azp is the audience; must match the edge's oidc.azp_as_audience ($ORGSVC_AZP_AS_AUDIENCE)")
		roles     = fs.String("role-claims", env("ORGSVC_ROLE_CLAIMS", strings.Join(identity.DefaultRoleClaims, ",")), "comma-separated claim paths holding roles; ${audience} stands for -audience, ${azp} for the token's client (never read roles there: any client's owner could define svc-admin); must match the edge's oidc.role_claims ($ORGSVC_ROLE_CLAIMS)")
		invTTL    = fs.Duration("invitation-ttl", durationEnv("ORGSVC_INVITATION_TTL", 7*24*time.Hour), "how long invitations stay pending ($ORGSVC_INVITATION_TTL)")
		provision = fs.Duration("provision-delay", durationEnv("ORGSVC_PROVISION_DELAY", 2*time.Second), "PROVISIONING time of a new environment ($ORGSVC_PROVISION_DELAY)")
		logFormat = fs.String("log-format", env("ORGSVC_LOG_FORMAT", "json"), "text or json ($ORGSVC_LOG_FORMAT)")
		health    = fs.String("healthcheck", "", "probe this URL (e.g. http://127.0.0.1:9092/readyz) and exit 0 if it answers 200: a container health check")
		dev       = fs.Bool("dev", false, "development mode: start a development issuer on 127.0.0.1:8081 and use SQLite in -data")
		dataDir   = fs.String("data", "", "with -dev: directory for the SQLite file (default: a new temporary directory)")
		showVer   = fs.Bool("version", false, "print the version and exit")
	)
	bodyTimeout := fs.Duration("body-timeout", durationEnv("ORGSVC_BODY_TIMEOUT", orgsvc.DefaultBodyTimeout),
		"how long a call's whole request body may take to arrive; keep it above the edge's requests.body_timeout ($ORGSVC_BODY_TIMEOUT)")
	watchCheck := fs.Duration("watch-access-check", durationEnv("ORGSVC_WATCH_ACCESS_CHECK", 30*time.Second),
		"how often an open WatchEnvironment stream checks that its caller still has access ($ORGSVC_WATCH_ACCESS_CHECK)")
	watchPoll := fs.Duration("watch-poll", durationEnv("ORGSVC_WATCH_POLL", 2*time.Second),
		"how often an open WatchEnvironment stream re-reads its environment, to see changes made through other replicas ($ORGSVC_WATCH_POLL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *watchPoll <= 0 {
		return fmt.Errorf("-watch-poll (or ORGSVC_WATCH_POLL) must be positive, got %v", *watchPoll)
	}
	if *showVer {
		fmt.Printf("orgsvc %s\n", version())
		return nil
	}
	if *health != "" {
		return healthcheck.Check(*health)
	}
	if *dev && *logFormat == "json" && os.Getenv("ORGSVC_LOG_FORMAT") == "" {
		*logFormat = "text"
	}
	log, err := newLogger(*logFormat)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, shutdownTracing, err := telemetry.Setup(ctx, "orgsvc", version())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(ctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()

	if *dev {
		iss, err := devissuer.Start("127.0.0.1:8081", devissuer.DefaultConfig())
		if err != nil {
			return fmt.Errorf("start development issuer: %w", err)
		}
		defer iss.Close()
		*issuer = iss.URL()
		if *audience == "" && !*anyAud {
			*audience = devissuer.DefaultAudience
		}
		if *database == "" {
			dir := *dataDir
			if dir == "" {
				if dir, err = os.MkdirTemp("", "orgsvc-dev-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			*database = filepath.Join(dir, "orgsvc.db")
		}
	}
	switch {
	case *issuer == "":
		return errors.New("-issuer (or ORGSVC_ISSUER_URL) is required; for a try-out use -dev")
	case *database == "":
		return errors.New("-database (or ORGSVC_DATABASE) is required: a postgres:// DSN or a SQLite file path")
	case *audience == "" && !*anyAud:
		return errors.New("-audience (or ORGSVC_AUDIENCE) is required: the API's client id at the issuer, which every token must name in aud; " +
			"-allow-any-audience accepts tokens minted for any client, for development only")
	case *audience != "" && *anyAud:
		return errors.New("-allow-any-audience and -audience exclude each other")
	}

	running, err := orgsvc.Start(ctx, orgsvc.RunOptions{
		Addr: *addr, Database: *database, MaxDBConns: *dbConns, IssuerURL: *issuer, Audience: *audience, Logger: log,
		AllowAnyAudience: *anyAud, AzpAsAudience: *azpAud,
		RoleClaims: strings.Split(*roles, ","), AdminAddr: *adminAddr, Version: version(),
		Config: orgsvc.Config{InvitationTTL: *invTTL, ProvisionDelay: *provision, WatchAccessCheck: *watchCheck, WatchPoll: *watchPoll, BodyTimeout: *bodyTimeout},
	})
	if err != nil {
		return err
	}
	log.Info("orgsvc listening", "addr", running.Addr, "admin", running.AdminAddr, "issuer", *issuer, "database", redactDSN(*database))
	if *dev {
		printDev(running.Addr, running.AdminAddr, *issuer, *database)
	}

	select {
	case err := <-running.Done():
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining open calls")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return running.Shutdown(shutdownCtx)
}

func newLogger(format string) (*slog.Logger, error) {
	log, err := logformat.New(os.Stderr, format, slog.LevelInfo)
	if err != nil {
		return nil, fmt.Errorf("-log-format: %w", err)
	}
	return log, nil
}

// redactDSN hides a password in a postgres:// DSN.
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.LastIndex(dsn, "@"); at > i {
			if colon := strings.Index(dsn[i+3:at], ":"); colon >= 0 {
				return dsn[:i+3+colon] + ":***" + dsn[at:]
			}
		}
	}
	return dsn
}

func printDev(addr, admin, issuer, database string) {
	fmt.Printf(`
orgsvc development mode
  backend  http://%[1]s   (Connect, gRPC, gRPC-Web, HTTP/JSON; h2c)
  admin    http://%[4]s   /healthz /readyz /metrics
  issuer   %[2]s
  database %[3]s

Credentials:
  client credentials: svc-admin, svc-env-manager, svc-viewer (secret dev-secret)
  password grant (client cli): alice/alice (free), bob/bob (pro), carol/carol (enterprise),
                               any free-<x>, pro-<x>, enterprise-<x> with password dev

Try:
  TOKEN=$(curl -s -d grant_type=password -d client_id=cli -d username=alice -d password=alice %[2]s/protocol/openid-connect/token | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"name":"acme","billingEmail":"billing@acme.example"}' http://%[1]s/svc.v1.OrganizationService/CreateOrganization

Ctrl-C stops everything.
`, addr, issuer, database, admin)
}

// buildVersion is set at build time, as the Dockerfile does:
//
//	go build -ldflags "-X main.buildVersion=v1.2.3" ./cmd/orgsvc
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
