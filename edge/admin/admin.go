// Package admin is the edge's admin listener: the probes (/healthz,
// /readyz), /metrics, Go's profiles when asked for, the operator API for
// one customer's limits (docs/operations.md, "Operator controls"), and the
// operator page that shows the replica at a glance ("The operator page").
//
// It is not on the API's listener and is no step of the request chain;
// it reads and resets what the limit step keeps.
package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/ratelimit"
)

// Check is one readiness condition: nil when ready.
type Check struct {
	Name string
	Func func(context.Context) error
}

// Probes serves /healthz (the process is alive), /readyz (every check
// passes: the edge can serve) and /metrics. It belongs on a listener of its
// own, not the API's.
func Probes(g prometheus.Gatherer, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if report := NotReady(r.Context(), checks); len(report) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(report, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	return mux
}

// NotReady runs the checks, within ReadyTimeout, and returns what fails,
// one "name: error" each; none when the edge can serve. It decides /readyz
// here and gRPC's health service on the API listener (edge/health).
func NotReady(ctx context.Context, checks []Check) []string {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	var report []string
	for _, c := range checks {
		if err := c.Func(ctx); err != nil {
			report = append(report, fmt.Sprintf("%s: %v", c.Name, err))
		}
	}
	return report
}

// ReadyTimeout bounds one run of the readiness checks: a check that has
// not answered by then has failed.
const ReadyTimeout = 2 * time.Second

// Options are what the admin listener serves.
type Options struct {
	// Gatherer is what /metrics exports; Checks decide /readyz.
	Gatherer prometheus.Gatherer
	Checks   []Check
	// Limits is the limit step the operator API inspects and resets;
	// Auth verifies operators' tokens.
	Limits *limits.Step
	Auth   *authn.Authenticator
	Log    *slog.Logger
	// Addr is the admin listener's address: off loopback, every operator
	// call and profile needs a bearer token with the role svc-admin; on
	// loopback, calls a web page could send are refused (see fromBrowser).
	Addr string
	// Settle answers settle-quota; nil: 501 (no upstream.admin_url).
	Settle SettleFunc
	// Idempotency counts a subject's Idempotency-Key entries for inspect;
	// nil: not counted.
	Idempotency *idempotency.Step
	// Pprof serves Go's profiles under /debug/pprof/, behind the operator
	// API's gate: off loopback, a token with the role svc-admin.
	Pprof bool
	// Dashboard is what the operator page at /dashboard/ shows beside
	// the policy and the metrics; it is behind the same gate.
	Dashboard Dashboard
}

// New is the admin listener's handler: the probes, /metrics, the operator
// API and, with Pprof, the profiles.
func New(o Options) http.Handler {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	op := &operator{limits: o.Limits, auth: o.Auth, log: log, needToken: !loopbackAddr(o.Addr), settle: o.Settle, idem: o.Idempotency}
	var rates *ratelimit.Limiter
	if o.Limits != nil {
		rates = o.Limits.Rates
	}
	page := op.dashboard(o.Dashboard, &samples{g: o.Gatherer, rates: rates, now: time.Now})
	return mux(Probes(o.Gatherer, o.Checks...), op, page, o.Pprof)
}
