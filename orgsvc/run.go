package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/orgsvc/store"
)

// RunOptions configure a backend started by Start.
type RunOptions struct {
	Addr     string // listen address
	Database string // postgres:// DSN or a SQLite file path
	// MaxDBConns bounds the database connection pool; 0: the store's
	// default (8 for SQLite, 16 for PostgreSQL).
	MaxDBConns int
	IssuerURL  string
	// Audience is the API's client id at the issuer: tokens must name it in
	// aud. Required unless AllowAnyAudience (development only).
	Audience         string
	AllowAnyAudience bool
	// AzpAsAudience also accepts tokens whose azp is Audience (see
	// identity.Config).
	AzpAsAudience bool
	// RoleClaims are the claim paths holding roles (identity.DefaultRoleClaims
	// when empty): set them as the edge's, so both see the same service accounts.
	RoleClaims []string
	Config     Config // Store, Auth, Logger, Metrics and DBSystem are filled in by Start
	Logger     *slog.Logger
	// AdminAddr is where /metrics, /healthz and /readyz are served (a
	// listener of their own); empty: nowhere.
	AdminAddr string
	Version   string // the orgsvc_build_info version label
}

// Running is a backend serving on a socket.
type Running struct {
	Addr      string // the address it listens on
	AdminAddr string // the admin listener's address; empty without one
	srv       *http.Server
	admin     *http.Server
	store     store.Store
	served    chan error
	Service   *Service
}

// Start opens the database (applying migrations), and serves the backend on
// opts.Addr until Shutdown.
func Start(ctx context.Context, opts RunOptions) (*Running, error) {
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	st, err := store.Open(openCtx, opts.Database, store.WithMaxConns(opts.MaxDBConns))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	verifier, err := identity.NewVerifier(identity.Config{
		IssuerURL: opts.IssuerURL, Audience: opts.Audience, AllowAnyAudience: opts.AllowAnyAudience,
		AzpAsAudience: opts.AzpAsAudience, RoleClaims: opts.RoleClaims,
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	// A registry per backend, not the global one: a process may run
	// several (tests, the edge's development mode).
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := opts.Config
	cfg.Store, cfg.Auth, cfg.Logger = st, verifier, opts.Logger
	cfg.Metrics, cfg.DBSystem = NewMetrics(reg, opts.Version), DBSystem(opts.Database)
	svc, err := New(cfg)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	var adminLn net.Listener
	if opts.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", opts.AdminAddr); err != nil {
			_ = ln.Close()
			_ = st.Close()
			return nil, fmt.Errorf("admin listener: %w", err)
		}
	}
	r := &Running{Addr: ln.Addr().String(), srv: NewServer(opts.Addr, svc.Handler()), store: st, served: make(chan error, 2), Service: svc}
	go func() { r.served <- r.srv.Serve(ln) }()
	if adminLn != nil {
		r.AdminAddr = adminLn.Addr().String()
		r.admin = &http.Server{
			Handler:           AdminHandler(reg, svc.Ready, svc.AdminRoutes()...),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
		}
		go func() {
			if err := r.admin.Serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
				r.served <- fmt.Errorf("admin listener: %w", err)
			}
		}()
	}
	return r, nil
}

// Done receives the server's error if it stops on its own.
func (r *Running) Done() <-chan error { return r.served }

// Shutdown drains open calls (until ctx ends), then closes the database.
// The admin listener goes last, so that probes see the drain.
func (r *Running) Shutdown(ctx context.Context) error {
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if r.admin != nil {
		err = errors.Join(err, r.admin.Shutdown(ctx))
	}
	return errors.Join(err, r.store.Close())
}
