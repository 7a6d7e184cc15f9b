package admin

import (
	"embed"
	"io/fs"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/topk"
)

// The operator page (docs/operations.md, "The operator page"): static files
// embedded in the binary, so that it works without internet access, and
// one JSON document it polls. It sits behind the operator API's gate
// (admit), and acts through the operator API itself (inspect and
// reset-limits), audited there.

//go:embed web
var webFiles embed.FS

// PolicyLoad says when the policy in force was loaded and how the last
// attempt to load the configuration file went.
type PolicyLoad struct {
	LoadedAt time.Time
	// FailedAt and Error: the last reload failed (the policy loaded at
	// LoadedAt stays); zero when it succeeded.
	FailedAt time.Time
	Error    string
}

// Dashboard is what the operator page shows beside the limit step's
// policy. Every field may be left zero: the page then shows less.
type Dashboard struct {
	Backends  func() []proxy.Backend
	Refusals  *topk.Refusals
	Policy    func() PolicyLoad
	RedisMode string // config.ModeStandalone, ModeSentinel, ModeCluster
	// EjectFor is upstream.eject_for: when an ejection began.
	EjectFor time.Duration
	// PlanClaim is oidc.plan_claim: a token's plan comes from it first.
	PlanClaim string
	Version   string
}

// topRefused is how many of the subjects refused most the page lists.
const topRefused = 10

type dashboard struct {
	Dashboard
	op      *operator
	samples *samples
	files   http.Handler
}

func (o *operator) dashboard(d Dashboard, s *samples) *dashboard {
	sub, _ := fs.Sub(webFiles, "web") // the directory is embedded: no error
	return &dashboard{Dashboard: d, op: o, samples: s, files: http.StripPrefix("/dashboard/", http.FileServerFS(sub))}
}

// page serves the page's files to whom admit lets in. Opening the page
// (its HTML) is audited; its script and styles are not.
func (d *dashboard) page(w http.ResponseWriter, r *http.Request) {
	who, ok := d.op.admit(w, r, "dashboard", false)
	if !ok {
		return
	}
	if r.URL.Path == "/dashboard/" {
		d.op.log.Info("admin action", "audit", "operator", "action", "dashboard", "who", who, "remote", r.RemoteAddr)
	}
	pageHeaders(w.Header())
	d.files.ServeHTTP(w, r)
}

// pageHeaders keep the page to itself: nothing loaded from elsewhere, no
// inline script, never framed (a framed page could be clicked through).
func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// state answers the JSON document the page polls. It reads memory only:
// the metrics (sampled at most every sampleEvery whoever polls), the pool,
// the policy; never Redis.
func (d *dashboard) state(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.op.admit(w, r, "dashboard", false); !ok {
		return
	}
	newest, recent, oldest := d.samples.window()
	st := dashboardState{Now: newest.at.UTC(), Version: d.Version, Policy: d.policy(),
		Redis: d.redis(newest, recent, oldest), Traffic: d.traffic(newest, recent, oldest)}
	if recent != nil {
		st.RecentSeconds = newest.at.Sub(recent.at).Seconds()
		st.SpanSeconds = newest.at.Sub(oldest.at).Seconds()
	}
	st.Backends = d.backends(newest, oldest)
	pageHeaders(w.Header())
	writeJSON(w, http.StatusOK, st)
}

type dashboardState struct {
	Now     time.Time `json:"now"`
	Version string    `json:"version"`
	// RecentSeconds and SpanSeconds are what the rates span: "now" (about
	// recentSpan) and "the last minutes" (up to sampleSpan, since the
	// page has been open); 0 until a second sample.
	RecentSeconds float64        `json:"recent_seconds"`
	SpanSeconds   float64        `json:"span_seconds"`
	Policy        policyState    `json:"policy"`
	Backends      []backendState `json:"backends"`
	Redis         redisState     `json:"redis"`
	Traffic       trafficState   `json:"traffic"`
}

type policyState struct {
	LoadedAt       time.Time   `json:"loaded_at"`
	ReloadFailedAt *time.Time  `json:"reload_failed_at,omitempty"`
	ReloadError    string      `json:"reload_error,omitempty"`
	DefaultPlan    string      `json:"default_plan"`
	PlanClaim      string      `json:"plan_claim"`
	Plans          []planState `json:"plans"`
	// SubjectPlans and SubjectQuotas count the per-subject overrides.
	SubjectPlans   int              `json:"subject_plans"`
	SubjectQuotas  int              `json:"subject_quotas"`
	Operations     []operationState `json:"operations"`
	OnRedisFailure string           `json:"on_redis_failure"`
	LocalShare     float64          `json:"local_share"`
}

type planState struct {
	Name              string `json:"name"`
	RequestsPerMinute int    `json:"requests_per_minute"`
	Burst             int    `json:"burst"`
	RequestsPerDay    int    `json:"requests_per_day"` // 0: no daily cap
	Quotas            Quotas `json:"quotas"`           // 0: unlimited
	Shadow            bool   `json:"shadow"`
	// Sources say how a subject gets this plan: "claim" (its token's
	// plan claim names it), "subject_plans" (an override, Overrides
	// subjects), "default" (neither applies).
	Sources   []string `json:"sources"`
	Overrides int      `json:"overrides"`
}

type operationState struct {
	Procedure         string   `json:"procedure"`
	RatePerMinute     int      `json:"rate_per_minute"`
	ConcurrentStreams int      `json:"concurrent_streams"`
	Quota             string   `json:"quota,omitempty"`
	Shadow            bool     `json:"shadow"`
	Idempotent        bool     `json:"idempotent"`
	Roles             []string `json:"service_account_roles"`
}

func (d *dashboard) policy() policyState {
	pol := d.op.limits.Live()
	l := pol.Limits
	ps := policyState{DefaultPlan: l.DefaultPlan, PlanClaim: d.PlanClaim, SubjectPlans: len(l.SubjectPlans), SubjectQuotas: len(l.SubjectQuotas),
		OnRedisFailure: string(l.OnRedisFailure), LocalShare: l.LocalShare, Plans: []planState{}, Operations: []operationState{}}
	if d.Policy != nil {
		p := d.Policy()
		ps.LoadedAt = p.LoadedAt.UTC()
		if !p.FailedAt.IsZero() {
			at := p.FailedAt.UTC()
			ps.ReloadFailedAt, ps.ReloadError = &at, p.Error
		}
	}
	overrides := map[string]int{}
	for _, plan := range l.SubjectPlans {
		overrides[plan]++
	}
	for name, p := range l.Plans {
		s := planState{Name: name, RequestsPerMinute: p.RequestsPerMinute, Burst: p.Burst, RequestsPerDay: int(p.RequestsPerDay),
			Quotas: Quotas(policy.QuotaOf(p.Quotas)), Shadow: p.Shadow, Sources: []string{"claim"}, Overrides: overrides[name]}
		if s.Overrides > 0 {
			s.Sources = append(s.Sources, "subject_plans")
		}
		if name == l.DefaultPlan {
			s.Sources = append(s.Sources, "default")
		}
		ps.Plans = append(ps.Plans, s)
	}
	slices.SortFunc(ps.Plans, func(a, b planState) int { return strings.Compare(a.Name, b.Name) })
	for _, op := range pol.Table.Operations() {
		if op.RatePerMinute == 0 && op.ConcurrentStreams == 0 && op.Quota == "" && !op.Shadow {
			continue
		}
		ps.Operations = append(ps.Operations, operationState{Procedure: op.Procedure, RatePerMinute: op.RatePerMinute,
			ConcurrentStreams: op.ConcurrentStreams, Quota: op.Quota, Shadow: op.Shadow, Idempotent: op.Idempotent,
			Roles: append([]string{}, op.ServiceAccountRoles...)})
	}
	slices.SortFunc(ps.Operations, func(a, b operationState) int { return strings.Compare(a.Procedure, b.Procedure) })
	return ps
}

type backendState struct {
	Addr string `json:"addr"`
	// State is "healthy" or "ejected"; Reason says why it is ejected.
	State        string     `json:"state"`
	Reason       string     `json:"reason,omitempty"`
	Since        *time.Time `json:"since,omitempty"`
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	InFlight     int64      `json:"in_flight"`
	// Over the span: its share of the calls sent to every backend, the
	// share of its calls that failed, its latency (ms; null: no call).
	Share     float64      `json:"share"`
	Calls     float64      `json:"calls"`
	ErrorRate float64      `json:"error_rate"`
	P50ms     *float64     `json:"p50_ms"`
	P99ms     *float64     `json:"p99_ms"`
	LastCheck *checkResult `json:"last_check,omitempty"`
}

type checkResult struct {
	At     time.Time `json:"at"`
	Passed bool      `json:"passed"`
	Error  string    `json:"error,omitempty"`
}

func (d *dashboard) backends(newest, oldest *sample) []backendState {
	out := []backendState{}
	if d.Backends == nil {
		return out
	}
	total := 0.0
	for _, b := range d.Backends() {
		s := backendState{Addr: b.Addr, State: "healthy", InFlight: b.InFlight}
		switch {
		case b.Ejected:
			s.State, s.Reason = "ejected", "it refused a connection or failed calls in a row"
			since, until := b.EjectedUntil.Add(-d.EjectFor).UTC(), b.EjectedUntil.UTC()
			s.Since, s.EjectedUntil = &since, &until
			if !b.Healthy {
				s.Reason = "it fails its health checks, and " + s.Reason
			}
		case !b.Healthy:
			s.State, s.Reason = "ejected", "it fails its health checks"
		}
		if !b.Healthy || (!b.Ejected && !b.HealthSince.IsZero()) {
			since := b.HealthSince.UTC()
			s.Since = &since
		}
		if c := b.LastCheck; c != nil {
			s.LastCheck = &checkResult{At: c.At.UTC(), Passed: c.Error == "", Error: clipError(c.Error)}
		}
		if now := newest.backends[b.Addr]; now != nil {
			var then backendAt
			if oldest != nil && oldest.backends[b.Addr] != nil {
				then = *oldest.backends[b.Addr]
			}
			answered := now.calls[proxy.Answered] - then.calls[proxy.Answered]
			failed := now.calls[proxy.Failed] - then.calls[proxy.Failed]
			s.Calls = max(answered+failed+now.calls[proxy.Abandoned]-then.calls[proxy.Abandoned], 0)
			if answered+failed > 0 {
				s.ErrorRate = failed / (answered + failed)
			}
			if oldest != nil {
				h := now.duration.since(then.duration)
				s.P50ms, s.P99ms = ms(h.quantile(0.5)), ms(h.quantile(0.99))
			}
		}
		total += s.Calls
		out = append(out, s)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = out[i].Calls / total
		}
	}
	return out
}

// ms is seconds in milliseconds, nil for none.
func ms(s float64) *float64 {
	if math.IsNaN(s) {
		return nil
	}
	v := math.Round(s*1e6) / 1e3
	return &v
}

func clipError(s string) string {
	const most = 300
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

type redisState struct {
	Mode           string `json:"mode"`
	OnRedisFailure string `json:"on_redis_failure"`
	// Breaker: "closed" (calls go to Redis), "open", "half-open".
	Breaker  string `json:"breaker"`
	FailOpen bool   `json:"fail_open"` // deciding on this replica's local share now
	// Over the span (latency over recent too, ms; null: no round trip).
	P50ms             *float64 `json:"p50_ms"`
	P99ms             *float64 `json:"p99_ms"`
	RecentP99ms       *float64 `json:"recent_p99_ms"`
	Calls             float64  `json:"calls"`
	Errors            float64  `json:"errors"`
	FailOpenAllowed   float64  `json:"fail_open_allowed"`
	FailOpenRefused   float64  `json:"fail_open_refused"`
	UnavailableCalled float64  `json:"unavailable"` // refused unavailable under fail_closed
}

func (d *dashboard) redis(newest, recent, oldest *sample) redisState {
	s := newest.redisStats
	r := redisState{Mode: d.RedisMode, OnRedisFailure: string(d.op.limits.Live().Limits.OnRedisFailure), Breaker: s.Breaker.String(), FailOpen: s.FailOpen}
	if oldest == nil {
		return r
	}
	o := oldest.redisStats
	delta := func(f func(ratelimit.Stats) uint64) float64 { return float64(f(s)) - float64(min(f(o), f(s))) }
	r.Calls = delta(func(s ratelimit.Stats) uint64 { return s.RedisCalls })
	r.Errors = delta(func(s ratelimit.Stats) uint64 { return s.RedisErrors })
	r.FailOpenAllowed = delta(func(s ratelimit.Stats) uint64 { return s.AllowedFailOpen })
	r.FailOpenRefused = delta(func(s ratelimit.Stats) uint64 { return s.RefusedFailOpen })
	r.UnavailableCalled = delta(func(s ratelimit.Stats) uint64 { return s.Unavailable })
	h := newest.redis.since(oldest.redis)
	r.P50ms, r.P99ms = ms(h.quantile(0.5)), ms(h.quantile(0.99))
	r.RecentP99ms = ms(newest.redis.since(recent.redis).quantile(0.99))
	return r
}

type trafficState struct {
	// PerSecond: calls per second by outcome (forwarded, answered,
	// refused, replayed, error) over recent; Calls: how many over the span.
	PerSecond map[string]float64 `json:"per_second"`
	Calls     map[string]float64 `json:"calls"`
	// Refusals by plan and limit over the span (shadow: what a shadow
	// limit would have refused).
	Refusals    []refusalCount `json:"refusals"`
	OpenStreams float64        `json:"open_streams"`
	InFlight    float64        `json:"in_flight"`
	Held        float64        `json:"held"`
	// MostRefused: the subjects refused most in the last topk.Windows
	// minutes, on this replica.
	MostRefused       []topk.Subject `json:"most_refused"`
	MostRefusedWindow float64        `json:"most_refused_minutes"`
}

type refusalCount struct {
	Plan      string  `json:"plan"`
	Limit     string  `json:"limit"`
	Shadow    bool    `json:"shadow"`
	Calls     float64 `json:"calls"`
	PerSecond float64 `json:"per_second"`
}

func (d *dashboard) traffic(newest, recent, oldest *sample) trafficState {
	t := trafficState{PerSecond: map[string]float64{}, Calls: map[string]float64{}, Refusals: []refusalCount{},
		OpenStreams: newest.streams, InFlight: newest.inflight, Held: newest.held, MostRefused: []topk.Subject{}, MostRefusedWindow: topk.Windows}
	if d.Refusals != nil {
		t.MostRefused = d.Refusals.Top(topRefused)
	}
	if oldest == nil {
		return t
	}
	dt := newest.at.Sub(recent.at).Seconds()
	for outcome, n := range newest.outcomes {
		t.Calls[outcome] = max(n-oldest.outcomes[outcome], 0)
		t.PerSecond[outcome] = max(n-recent.outcomes[outcome], 0) / dt
	}
	for k, n := range newest.decisions {
		if calls := n - oldest.decisions[k]; calls > 0 {
			t.Refusals = append(t.Refusals, refusalCount{Plan: k.Plan, Limit: k.Limit, Shadow: k.Outcome == limits.OutcomeShadowRefused,
				Calls: calls, PerSecond: max(n-recent.decisions[k], 0) / dt})
		}
	}
	slices.SortFunc(t.Refusals, func(a, b refusalCount) int {
		if a.Calls != b.Calls {
			return int(math.Copysign(1, b.Calls-a.Calls))
		}
		return strings.Compare(a.Plan+a.Limit, b.Plan+b.Limit)
	})
	return t
}
