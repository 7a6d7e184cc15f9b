package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/orgsvc/store"
)

// RunOptions configure a backend started by Start.
type RunOptions struct {
	Addr      string // listen address
	Database  string // postgres:// DSN or a SQLite file path
	IssuerURL string
	Audience  string
	// RoleClaims are the claim paths holding roles (identity.DefaultRoleClaims
	// when empty): set them as the edge's, so both see the same service accounts.
	RoleClaims []string
	Config     Config // Store and Auth are filled in by Start
	Logger     *slog.Logger
}

// Running is a backend serving on a socket.
type Running struct {
	Addr    string // the address it listens on
	srv     *http.Server
	store   store.Store
	served  chan error
	Service *Service
}

// Start opens the database (applying migrations), and serves the backend on
// opts.Addr until Shutdown.
func Start(ctx context.Context, opts RunOptions) (*Running, error) {
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	st, err := store.Open(openCtx, opts.Database)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	verifier, err := identity.NewVerifier(identity.Config{IssuerURL: opts.IssuerURL, Audience: opts.Audience, RoleClaims: opts.RoleClaims})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	cfg := opts.Config
	cfg.Store, cfg.Auth, cfg.Logger = st, verifier, opts.Logger
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
	r := &Running{Addr: ln.Addr().String(), srv: NewServer(opts.Addr, svc.Handler()), store: st, served: make(chan error, 1), Service: svc}
	go func() { r.served <- r.srv.Serve(ln) }()
	return r, nil
}

// Done receives the server's error if it stops on its own.
func (r *Running) Done() <-chan error { return r.served }

// Shutdown drains open calls (until ctx ends), then closes the database.
func (r *Running) Shutdown(ctx context.Context) error {
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, r.store.Close())
}
