package testkit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/orgsvc"
	"github.com/orgedge/edge/orgsvc/store"
)

// StartIssuer starts a development issuer with the development fixtures on
// a free loopback port and stops it when the test ends.
func StartIssuer(t testing.TB) *devissuer.Server {
	t.Helper()
	s, err := devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig())
	if err != nil {
		t.Fatalf("start issuer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Issuer is what a test may ask of the shared issuer: its URL, to verify
// its tokens and to get them with Token.
type Issuer interface{ URL() string }

var shared struct {
	once sync.Once
	srv  *devissuer.Server
	err  error
}

// SharedIssuer returns the development issuer (the development fixtures) of
// the whole test binary, started at its first use and left running until
// the process ends. Its tokens and keys are what every stack test of a
// package needs, and each issuer generates an RSA key, which costs a race
// build about a tenth of a second of CPU: one is enough. It gives its URL
// only; a test that rotates or retires keys, mints tokens, counts what the
// issuer serves or stops it starts one of its own with StartIssuer.
func SharedIssuer(t testing.TB) Issuer {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = devissuer.Start("127.0.0.1:0", devissuer.DefaultConfig()) })
	if shared.err != nil {
		t.Fatalf("start the shared issuer: %v", shared.err)
	}
	return shared.srv
}

// SlowIssuer is a development issuer whose discovery document answers
// after a delay, or not at all while down: an identity provider far away
// or not up yet.
type SlowIssuer struct {
	*devissuer.Issuer
	delay atomic.Int64 // nanoseconds
	down  atomic.Bool
}

// StartSlowIssuer starts a SlowIssuer with the development fixtures on a
// free loopback port, its discovery document delayed by delay, and stops it
// when the test ends.
func StartSlowIssuer(t testing.TB, delay time.Duration) *SlowIssuer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	iss, err := devissuer.New("http://"+ln.Addr().String(), devissuer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := &SlowIssuer{Issuer: iss}
	s.delay.Store(int64(delay))
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") {
			if s.down.Load() {
				http.Error(w, "not up yet", http.StatusServiceUnavailable)
				return
			}
			select {
			case <-time.After(time.Duration(s.delay.Load())):
			case <-r.Context().Done():
				return
			}
		}
		iss.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// Down makes discovery fail (503) until Up.
func (s *SlowIssuer) Down() { s.down.Store(true) }

// Up makes discovery answer again, after the delay.
func (s *SlowIssuer) Up() { s.down.Store(false) }

// Token gets a real token from the issuer's token endpoint: the client
// credentials grant for a client id starting with "svc-" (secret
// dev-secret), the password grant through the cli client otherwise (the
// password of the fixture users is their name; generated users' is "dev").
func Token(t testing.TB, issuerURL, who string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		tok string
		err error
	)
	switch {
	case strings.HasPrefix(who, "svc-"):
		tok, err = ClientCredentials(ctx, HTTP1Client, issuerURL, who, "dev-secret")
	case strings.Contains(who, "-"):
		tok, err = devissuer.Password(ctx, HTTP1Client, issuerURL, "cli", who, "dev")
	default:
		tok, err = devissuer.Password(ctx, HTTP1Client, issuerURL, "cli", who, who)
	}
	if err != nil {
		t.Fatalf("token for %s: %v", who, err)
	}
	return tok
}

// Database names a storage backend.
type Database string

// The storage backends.
const (
	SQLite   Database = "sqlite"
	Postgres Database = "postgres"
)

// Databases lists every storage backend, for table-driven suites.
var Databases = []Database{SQLite, Postgres}

// OpenStore opens an empty store of the given kind for this test: SQLite in
// a temporary directory, or a new PostgreSQL database (skipped without a
// server, failed under CI).
func OpenStore(t testing.TB, db Database) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		st  store.Store
		err error
	)
	switch db {
	case SQLite:
		st, err = store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "orgsvc.db"))
	case Postgres:
		st, err = store.OpenPostgres(ctx, testenv.PostgresDatabase(t))
	default:
		t.Fatalf("unknown database %q", db)
	}
	if err != nil {
		t.Fatalf("open %s store: %v", db, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Backend is a running backend.
type Backend struct {
	URL      string // http://127.0.0.1:port
	AdminURL string // http://127.0.0.1:port of /metrics, /healthz, /readyz
	Service  *orgsvc.Service
	Store    store.Store
}

// StartBackend serves the backend over a real loopback socket, verifying
// tokens against issuerURL, and its admin handler on another. cfg's Store,
// Auth, DBSystem and Metrics (in a registry of the backend's own) are
// filled in when unset.
func StartBackend(t testing.TB, db Database, issuerURL string, cfg orgsvc.Config) *Backend {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = OpenStore(t, db)
	}
	if cfg.DBSystem == "" {
		cfg.DBSystem = orgsvc.DBSystemSQLite
		if db == Postgres {
			cfg.DBSystem = orgsvc.DBSystemPostgreSQL
		}
	}
	reg := prometheus.NewRegistry()
	if cfg.Metrics == nil {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Metrics = orgsvc.NewMetrics(reg, "test")
	}
	if cfg.Auth == nil {
		v, err := identity.NewVerifier(identity.Config{IssuerURL: issuerURL, Audience: devissuer.DefaultAudience})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = v
	}
	svc, err := orgsvc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", svc.Handler())
	admin := &http.Server{Handler: orgsvc.AdminHandler(reg, svc.Ready, svc.AdminRoutes()...), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	go func() { _ = admin.Serve(adminLn) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = admin.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("backend: %v", err)
		}
	})
	return &Backend{URL: "http://" + ln.Addr().String(), AdminURL: "http://" + adminLn.Addr().String(), Service: svc, Store: cfg.Store}
}
