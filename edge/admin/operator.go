package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// SettleFunc reconciles one subject's environment quota with the backend's
// list of its environments, and returns what it changed (any value that
// encodes as JSON).
//
// With upstream.admin_url set, the edge wires reconcile.Reconciler.Settle
// here; without it settle-quota answers 501.
type SettleFunc func(ctx context.Context, subject string) (any, error)

// operator is the admin API for one customer: inspect a subject's limits
// and act on them (docs/operations.md, "Operator controls"). It lives on the
// admin listener. When that listener is not on loopback, every call needs a
// bearer token with the role svc-admin, verified like the API's tokens (and
// bounded per client address like them); on loopback, what a web page
// could send is refused (fromBrowser).
type operator struct {
	limits    *limits.Step
	auth      *authn.Authenticator
	log       *slog.Logger
	needToken bool
	settle    SettleFunc
	idem      *idempotency.Step // nil: keys not counted
}

// Operator roles and bounds.
const (
	operatorRole      = "svc-admin"
	maxSubjectLen     = 256
	operatorDeadline  = 5 * time.Second
	operatorPathStart = "/admin/v1/subjects/"
)

// loopbackAddr reports whether host:port listens on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// mux serves the operator API beside the probes' paths, and the operator
// page and the profiles behind the same gate as the operator API.
func mux(admin http.Handler, o *operator, page *dashboard, profiles bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", admin)
	mux.HandleFunc("GET /dashboard/", page.page)
	mux.HandleFunc("GET /dashboard/state", page.state)
	mux.HandleFunc("GET "+operatorPathStart+"{subject}", o.guard("inspect", false, o.inspect))
	mux.HandleFunc("POST "+operatorPathStart+"{subject}/reset-limits", o.guard("reset-limits", true, o.resetLimits))
	mux.HandleFunc("POST "+operatorPathStart+"{subject}/release-streams", o.guard("release-streams", true, o.releaseStreams))
	mux.HandleFunc("POST "+operatorPathStart+"{subject}/settle-quota", o.guard("settle-quota", true, o.settleQuota))
	if profiles {
		mux.HandleFunc("GET /debug/pprof/", o.gated("pprof", pprof.Index))
		mux.HandleFunc("GET /debug/pprof/cmdline", o.gated("pprof", pprof.Cmdline))
		mux.HandleFunc("GET /debug/pprof/profile", o.gated("pprof", pprof.Profile))
		mux.HandleFunc("GET /debug/pprof/symbol", o.gated("pprof", pprof.Symbol))
		mux.HandleFunc("GET /debug/pprof/trace", o.gated("pprof", pprof.Trace))
	}
	return mux
}

// operatorFunc answers one action on subject: a value to encode, or an
// error with its HTTP status.
type operatorFunc func(ctx context.Context, r *http.Request, subject string) (any, error)

type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }

// guard admits the operator (see admit), bounds the call, runs it and
// writes the audit line of every action (inspections too: they read a
// customer's state). changes: the action changes state.
func (o *operator) guard(action string, changes bool, f operatorFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		who, ok := o.admit(w, r, action, changes)
		if !ok {
			return
		}
		subject := r.PathValue("subject")
		if subject == "" || len(subject) > maxSubjectLen {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("the subject (a token's sub) must have 1 to %d bytes", maxSubjectLen)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), operatorDeadline)
		defer cancel()
		out, err := f(ctx, r, subject)
		status := http.StatusOK
		if err != nil {
			status = http.StatusServiceUnavailable
			if se := (*statusError)(nil); errors.As(err, &se) {
				status = se.status
			}
			out = map[string]string{"error": err.Error()}
		}
		// The audit line: who did what to whom, when (the line's time),
		// and how it went. It names the subject in clear, unlike the
		// access log: an audit trail must say whose counters were reset.
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelWarn
		}
		o.log.LogAttrs(r.Context(), level, "admin action",
			slog.String("audit", "operator"),
			slog.String("action", action), slog.String("who", who), slog.String("subject", subject),
			slog.Int("status", status), slog.String("remote", r.RemoteAddr),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
		writeJSON(w, status, out)
	}
}

// gated serves h (Go's profiles) to whom admit lets in, with an audit line.
func (o *operator) gated(action string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := o.admit(w, r, action, false)
		if !ok {
			return
		}
		o.log.Info("admin action", "audit", "operator", "action", action, "who", who, "path", r.URL.Path, "remote", r.RemoteAddr)
		h(w, r)
	}
}

// admit decides whether the call may go on, and names the operator. It
// refuses what a web page could send (see fromBrowser) and calls without
// a valid token with the role svc-admin, except without a token on a
// loopback listener. A refusal is answered, and audited like every
// action, with the reason but never the token.
func (o *operator) admit(w http.ResponseWriter, r *http.Request, action string, changes bool) (who string, ok bool) {
	status, err := o.fromBrowser(r, changes)
	if err == nil {
		who, err = o.who(r)
		var fl *authn.FailureLimitError
		switch {
		case err == nil:
			return who, true
		case errors.Is(err, errNotAdmin):
			status = http.StatusForbidden
		case errors.As(err, &fl):
			status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(fl.RetryAfter.Seconds()))))
			who = "unauthenticated"
		default:
			status, who = http.StatusUnauthorized, "unauthenticated"
			// A browser asks for the token as a password (see who).
			w.Header().Set("WWW-Authenticate", `Basic realm="orgedge admin: the password is an operator token (role `+operatorRole+`)", charset="UTF-8"`)
		}
	}
	if who == "" {
		who = "unknown"
	}
	subject := r.PathValue("subject")
	subject = subject[:min(len(subject), maxSubjectLen)]
	o.log.Warn("admin action refused", "audit", "operator", "action", action, "who", who,
		"subject", subject, "status", status, "remote", r.RemoteAddr, "err", err)
	writeJSON(w, status, map[string]string{"error": err.Error()})
	return who, false
}

// fromBrowser refuses a call that a web page in a browser on an operator's
// machine could make, but the operator page's own: the loopback listener
// needs no token, so no other page must be able to reach it at all.
//   - An Origin other than the listener's own (the operator page's):
//     browsers send one on every POST and every cross-origin call; curl
//     and scripts send none. A Sec-Fetch-Site other than same-origin
//     likewise.
//   - A state-changing call without Content-Type: application/json: a page
//     may POST text/plain or a form without asking, but a JSON body needs a
//     CORS preflight, which this listener never grants.
//   - Without a token on a loopback listener, a Host that is not a loopback
//     name: a page whose name was rebound to 127.0.0.1 reaches the listener
//     with its own name as Host.
func (o *operator) fromBrowser(r *http.Request, changes bool) (int, error) {
	if origin, ok := r.Header["Origin"]; ok && (len(origin) != 1 || origin[0] != "http://"+r.Host) {
		return http.StatusForbidden, errors.New("calls from web pages (with an Origin header) other than the operator page are refused: call the operator API with curl or a script")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return http.StatusForbidden, fmt.Errorf("calls from other sites (Sec-Fetch-Site: %s) are refused", clip(site))
	}
	if changes {
		if mt, ok := wire.MediaType(r.Header); !ok || mt != "application/json" {
			return http.StatusUnsupportedMediaType, errors.New("send Content-Type: application/json")
		}
	}
	if !o.needToken && r.Header.Get("Authorization") == "" && !loopbackHost(r.Host) {
		return http.StatusForbidden, fmt.Errorf("host %q is not a loopback name: without a token, call the loopback listener as 127.0.0.1, [::1] or localhost", clip(r.Host))
	}
	return 0, nil
}

// loopbackHost reports whether a Host header names loopback: localhost or
// a loopback address, with or without a port.
func loopbackHost(hostPort string) bool {
	host := hostPort
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// clip bounds a client's string quoted in an answer or a log line.
func clip(s string) string {
	const most = 64
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

var errNotAdmin = errors.New("the token lacks the role " + operatorRole)

// who names the operator: the verified token's client or user, or
// "loopback" when the admin listener is on loopback and no token came. A
// client address that failed too often gets *authn.FailureLimitError
// without its token being verified, as on the API's listener.
func (o *operator) who(r *http.Request) (string, error) {
	if !o.needToken && r.Header.Get("Authorization") == "" {
		return "loopback", nil
	}
	if _, token, ok := r.BasicAuth(); ok {
		// A browser sends the token it asked for as a password (any user
		// name), on the page and on each of its calls.
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
	}
	p, err := o.auth.AuthenticateRequest(r.Context(), r)
	if err != nil {
		var ie *identity.Error
		var fl *authn.FailureLimitError
		switch {
		case errors.As(err, &fl):
			return "", err
		case errors.As(err, &ie):
			return "", fmt.Errorf("%s: %s (the admin API on a non-loopback listener needs a bearer token with the role %s)", ie.Reason, ie.Message, operatorRole)
		}
		return "", errors.New("invalid token")
	}
	name := operatorName(p)
	if !p.HasRole(operatorRole) {
		return name, errNotAdmin
	}
	return name, nil
}

func operatorName(p *identity.Principal) string {
	switch {
	case p.Username != "":
		return p.Username
	case p.ClientID != "":
		return p.ClientID
	}
	return "sub:" + p.Subject
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// SubjectState is what GET /admin/v1/subjects/{subject} answers.
type SubjectState struct {
	Subject     string `json:"subject"`
	SubjectHash string `json:"subject_hash"` // as the access log names it
	Plan        string `json:"plan"`
	// PlanSource: "last_charged" (the plan the subject's last admitted
	// call was charged under, whatever decided it: the token's plan claim
	// included), else "subject_plans" or "default_plan" (no call since the
	// month before last, or the plan is no longer configured), or "query"
	// (?plan=).
	PlanSource string `json:"plan_source"`
	// LastChargedPlan is the plan of the subject's last admitted call, kept
	// as long as the subject's counts (until a day after the month of that
	// call); empty when there is none.
	LastChargedPlan string       `json:"last_charged_plan,omitempty"`
	Limits          []LimitState `json:"limits"`
	Daily           *DailyState  `json:"daily,omitempty"`
	// RequestsThisMonth counts admitted calls (UTC month).
	RequestsThisMonth int64        `json:"requests_this_month"`
	Streams           []StreamUse  `json:"streams"`
	Environments      Environments `json:"environments"`
	// IdempotencyKeys counts the Idempotency-Key entries it holds now (in
	// flight or kept for idempotency.ttl; idempotency.max_keys_per_subject
	// bounds them).
	IdempotencyKeys *int64 `json:"idempotency_keys,omitempty"`
}

// LimitState is one GCRA limit's standing.
type LimitState struct {
	Name              string  `json:"name"` // plan, op:<Method>
	RequestsPerMinute int     `json:"requests_per_minute"`
	Burst             int     `json:"burst"`
	Remaining         int     `json:"remaining"`
	ResetAfterSeconds float64 `json:"reset_after_seconds"` // until back to full
	Shadow            bool    `json:"shadow,omitempty"`
}

// DailyState is the daily cap's standing.
type DailyState struct {
	Limit     int       `json:"limit"`
	Used      int64     `json:"used"`
	Remaining int       `json:"remaining"`
	ResetAt   time.Time `json:"reset_at"`
	Shadow    bool      `json:"shadow,omitempty"`
}

// StreamUse is the subject's open streams of one procedure with a bound.
// Leases are per subject, so every bounded procedure shows the same count.
type StreamUse struct {
	Procedure string `json:"procedure"`
	Open      int    `json:"open"`
	Limit     int    `json:"limit"`
}

// Environments is the subject's environment quota use this month.
type Environments struct {
	Running          int     `json:"running"`
	CreatedThisMonth int     `json:"created_this_month"`
	VCPUHours        float64 `json:"vcpu_hours"`
	MemoryGBHours    float64 `json:"memory_gb_hours"`
	Quotas           Quotas  `json:"quotas"`
}

// Quotas are the subject's environment quotas (0: unlimited).
type Quotas struct {
	ConcurrentEnvironments int     `json:"concurrent_environments"`
	EnvironmentsPerMonth   int     `json:"environments_per_month"`
	VCPUHoursPerMonth      float64 `json:"vcpu_hours_per_month"`
	MemoryGBHoursPerMonth  float64 `json:"memory_gb_hours_per_month"`
}

// planOf is the plan an operator looks at: ?plan= if it names a plan, else
// the subject's subject_plans entry, else the default plan. inspect prefers
// the plan the subject was last charged under, which only Redis knows.
func planOf(pol *policy.Live, r *http.Request, subject string) (name, source string, plan config.Plan, err error) {
	if q := r.URL.Query().Get("plan"); q != "" {
		p, ok := pol.Limits.Plans[strings.ToLower(q)]
		if !ok {
			return "", "", config.Plan{}, &statusError{http.StatusBadRequest, fmt.Errorf("plan %q is not configured", q)}
		}
		return strings.ToLower(q), "query", p, nil
	}
	name, plan = pol.Limits.PlanFor("", subject)
	source = "default_plan"
	if _, ok := pol.Limits.SubjectPlans[subject]; ok {
		source = "subject_plans"
	}
	return name, source, plan, nil
}

func (o *operator) inspect(ctx context.Context, r *http.Request, subject string) (any, error) {
	pol := o.limits.Live()
	planName, source, plan, err := planOf(pol, r, subject)
	if err != nil {
		return nil, err
	}
	d, err := o.limits.Rates.Peek(ctx, policy.Rates(subject, plan, pol.Table.Operations()...))
	if err != nil {
		return nil, fmt.Errorf("read rate limits: %w", err)
	}
	// The plan last charged comes with the limits; when it is another
	// configured plan, its limits are read again under it.
	if charged, ok := pol.Limits.Plans[d.Policy]; ok && source != "query" {
		if d.Policy != planName {
			planName, plan = d.Policy, charged
			if d, err = o.limits.Rates.Peek(ctx, policy.Rates(subject, plan, pol.Table.Operations()...)); err != nil {
				return nil, fmt.Errorf("read rate limits: %w", err)
			}
		}
		source = "last_charged"
	}
	st := SubjectState{Subject: subject, SubjectHash: identity.SubjectHash(subject), Plan: planName, PlanSource: source,
		LastChargedPlan: d.Policy, RequestsThisMonth: d.Month, Streams: []StreamUse{}}
	for _, s := range d.States {
		if s.Name == ratelimit.DailyName {
			st.Daily = &DailyState{Limit: s.Limit, Used: d.Today, Remaining: s.Remaining,
				ResetAt: time.Now().Add(s.ResetAfter).UTC().Truncate(time.Second), Shadow: plan.Shadow}
			continue
		}
		shadow := plan.Shadow
		if s.Name != policy.PlanLimit {
			shadow = opShadow(pol, strings.TrimPrefix(s.Name, policy.OperationPrefix))
		}
		st.Limits = append(st.Limits, LimitState{Name: s.Name, RequestsPerMinute: s.Limit, Burst: s.Burst,
			Remaining: s.Remaining, ResetAfterSeconds: s.ResetAfter.Round(time.Millisecond).Seconds(), Shadow: shadow})
	}
	var open int
	var bounded []config.Operation
	for _, op := range pol.Table.Operations() {
		if op.ConcurrentStreams > 0 {
			bounded = append(bounded, op)
		}
	}
	if len(bounded) > 0 {
		if open, err = o.limits.Streams.Open(ctx, subject); err != nil {
			return nil, fmt.Errorf("read streams: %w", err)
		}
	}
	for _, op := range bounded {
		st.Streams = append(st.Streams, StreamUse{Procedure: op.Procedure, Open: open, Limit: op.ConcurrentStreams})
	}
	u, err := o.limits.Envs.Usage(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("read environment quota: %w", err)
	}
	st.Environments = Environments{Running: u.Environments, CreatedThisMonth: u.Created,
		VCPUHours: u.VCPUHours, MemoryGBHours: u.MemoryGBHours, Quotas: Quotas(policy.QuotaOf(pol.Limits.QuotasFor(subject, planName)))}
	if o.idem != nil {
		n, err := o.idem.Keys(ctx, subject)
		if err != nil {
			return nil, fmt.Errorf("read idempotency keys: %w", err)
		}
		st.IdempotencyKeys = &n
	}
	return st, nil
}

// opShadow reports whether the operation named by method is in shadow mode.
func opShadow(pol *policy.Live, method string) bool {
	for _, op := range pol.Table.Operations() {
		if strings.HasSuffix(op.Procedure, "/"+method) {
			return op.Shadow
		}
	}
	return false
}

func (o *operator) resetLimits(ctx context.Context, r *http.Request, subject string) (any, error) {
	pol := o.limits.Live()
	var names []string
	// Every plan's limit shares one key ("plan"), so resetting it covers
	// whichever plan the subject's token names.
	for _, l := range policy.Rates(subject, config.Plan{}, pol.Table.Operations()...).Limits {
		names = append(names, l.Name)
	}
	if err := o.limits.Rates.Reset(ctx, subject, names); err != nil {
		return nil, err
	}
	return map[string]any{"reset": append(names, ratelimit.DailyName)}, nil
}

func (o *operator) releaseStreams(ctx context.Context, r *http.Request, subject string) (any, error) {
	n, err := o.limits.Streams.ReleaseAll(ctx, subject)
	if err != nil {
		return nil, err
	}
	return map[string]any{"released": n}, nil
}

func (o *operator) settleQuota(ctx context.Context, r *http.Request, subject string) (any, error) {
	if o.settle == nil {
		return nil, &statusError{http.StatusNotImplemented, errors.New("settling the environment quota against the backend is not available in this build")}
	}
	return o.settle(ctx, subject)
}
