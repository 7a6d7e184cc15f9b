package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenarios.
const (
	Conformance = "conformance"
	Operations  = "operations"
	Idempotency = "idempotency"
	Overhead    = "overhead"
)

var scenarios = []string{Conformance, Operations, Idempotency, Overhead}

// Defaults, gentle on purpose: a short run against the development stack.
const (
	defaultEdge        = "http://127.0.0.1:8080"
	defaultAdmin       = "http://127.0.0.1:9090" // the development edge's admin listener
	defaultIssuer      = "http://127.0.0.1:8081/realms/dev"
	defaultSubjects    = "free=2,pro=1,enterprise=1"
	defaultDuration    = 20 * time.Second
	defaultOverheadRPS = 100
	defaultPublicCli   = "cli" // the development issuer's public client
	devUserPassword    = "dev" // the development issuer's generated users' password
)

// Options is a parsed, validated command line.
type Options struct {
	Scenario    string
	Edges       []string
	Backend     string
	Protocol    Protocol
	Subjects    []PlanCount // generated development-issuer users per plan
	SubjectsSet bool        // -subjects was given: scenarios keep it as it is
	Plans       []Plan
	Rate        float64 // overhead: calls per second over both targets (open model)
	Concurrency int     // overhead: workers (closed model)
	Duration    time.Duration
	Overload    float64 // conformance: offered rate as a multiple of the plan's
	Issuer      string
	ClientID    string  // the client for the password grant
	Clients     []Named // client-credentials subjects
	Users       []Named // password-grant subjects
	Keys        int     // idempotency: keys
	Duplicates  int     // idempotency: concurrent calls per key
	MaxInFlight int
	Out         string   // JSON report path; the HTML report goes beside it
	Admins      []string // each edge's admin listener (its /metrics), in the order of Edges; none: not read

	Thresholds Thresholds

	ClientSecret string `json:"-"`
	Password     string `json:"-"`

	// Progress receives the progress line; nil means none.
	Progress io.Writer
	// Log receives setup and cleanup notes; nil means none.
	Log io.Writer
}

// Thresholds are what a user states a run must meet beyond the scenario's
// own checks, as k6's thresholds: crossing one fails the run, except the
// achieved rate, whose shortfall makes it inconclusive (the load the
// verdict needs was not offered).
type Thresholds struct {
	MaxErrorRate    float64       `json:"max_error_rate"`             // failed calls over calls sent
	MaxP99          time.Duration `json:"max_p99,omitempty"`          // the run's answered calls (overhead: through the edge)
	MaxOverheadP50  time.Duration `json:"max_overhead_p50,omitempty"` // overhead: what the edge adds at p50
	MaxOverheadP99  time.Duration `json:"max_overhead_p99,omitempty"` // overhead: what the edge adds at p99
	MinAchievedRate float64       `json:"min_achieved_rate"`          // calls sent over calls planned (open model)
}

// PlanCount is an entry of -subjects.
type PlanCount struct {
	Plan  string
	Count int
}

// Named is an entry of -users or -client-id: a name and, optionally, the
// plan the edge should apply to it.
type Named struct {
	Name string
	Plan string
}

// plan returns the plan of that name.
func (o *Options) plan(name string) (Plan, bool) {
	for _, p := range o.Plans {
		if p.Name == name {
			return p, true
		}
	}
	return Plan{}, false
}

const usageText = `loadtest drives traffic at the API edge and judges what it sees.

Usage:
  go run ./loadtest [flags]

Scenarios (-scenario):
  conformance  each subject is offered -overload× (default 2×) what its plan
               allows over the run (burst + rate × duration) at an even pace
               (open model: fixed intervals, whatever the answers), so its
               burst drains before half-time and the plan's rate holds after.
               Per plan: admitted and refused against what the plan allows
               (the burst plus one request per emission interval, and the
               daily cap if it binds), a verdict with its tolerance,
               and a check of every refusal in the protocol used (HTTP 429 and
               Retry-After ≥ 1 for Connect unary and HTTP/JSON, grpc-status 8
               for gRPC and gRPC-Web; a RetryInfo of the same delay; one
               ErrorInfo RATE_LIMIT_EXCEEDED or DAILY_LIMIT_EXCEEDED;
               X-RateLimit-Limit/-Remaining/-Reset, RateLimit and
               RateLimit-Policy headers). Any malformed refusal fails the run.
  operations   CreateEnvironment 10/min (after creating an organization and a
               project), SearchCatalog 30/min, ValidateBlueprint 30/min, 21
               WatchEnvironment streams (the 21st refused
               CONCURRENT_STREAMS_EXCEEDED), and a free subject's third
               concurrent environment (refused ENVIRONMENT_QUOTA_EXCEEDED);
               each with its verdict. It deletes what it created.
  idempotency  -keys keys × -duplicates concurrent identical CreateOrganization
               calls with one Idempotency-Key each (unique names); then one late
               duplicate per key, which must be a replay. Counts answers,
               replays and aborted duplicates, and backend executions per key
               (organizations listed afterwards, plus already_exists answers):
               exactly one per key. It deletes the organizations.
  overhead     ListOrganizations straight to -backend and through the edge,
               alternating, at -rate (open model; default 100/s) or with
               -concurrency workers (closed model): p50, p90, p99, p99.9
               (HDR histograms), throughput, and what the edge adds.

Verdicts: PASS, FAIL or INCONCLUSIVE (a run that proves nothing either
way), each FAIL and INCONCLUSIVE with its reasons. Conformance judges each
subject, then each plan (FAIL if a subject failed, else INCONCLUSIVE if one
was inconclusive). Allowed = the burst left after a GetUsage probe (burst-1
for a new subject) + one request per emission interval (60s/rate) from the
probe to the subject's last send, capped by the daily cap left (cap -
requests today). Tolerance = max(1% of allowed, 1 request) + 1 request (one
emission interval of timing between the client's clock and the edge's).
FAIL if admitted > allowed + tolerance, allowed counted to the last
admitted call's answer (the latest the edge can have decided it), not its
send (over-admission), admitted +
unfinished < min(allowed, sent) - tolerance (over-refusal), any refusal is
malformed, or GetUsage reports other limits than -plans. INCONCLUSIVE if the
subject was not offered more than allowed + tolerance or nothing was
refused: its limit was never tested. Operation limits: at most the limit +
one request per emission interval from the first call's send to the last
admitted call's answer, at least that many (or every call) from the first
call's answer to the last call's send: judged by when the edge can have
admitted each call, with no other margin. Any malformed refusal fails any
scenario.

Thresholds (as k6's), for every scenario: -max-error-rate (default 0: any
call that fails otherwise than refused fails the run), -max-p99 (answered
calls; overhead: through the edge), -max-overhead-p50 and -max-overhead-p99
(overhead: what the edge adds); crossing one is a FAIL. -min-achieved
(default 0.95): an open-model run (conformance, overhead -rate) that sent
fewer of its planned calls, or left calls unfinished, is INCONCLUSIVE: the
tool could not offer the load, so the edge was not tested (as k6's dropped
iterations and vegeta's requested vs achieved rate). Without a latency
threshold, an overhead PASS says only that no call failed.

The edge's part: with -admin (each edge's admin listener, in the order of
-edge; the development edge's http://127.0.0.1:9090 by default), the tool
reads the edges' /metrics before and after the run, and a FAIL or
INCONCLUSIVE names what each edge did: connections it closed and why
(edge_connections_closed_total{reason}), calls decided on its local share
while Redis was unreachable (edge_fail_open_decisions_total{outcome}), early
calls held (edge_early_calls_held_total), calls answered unavailable by
reason, overload included (edge_unavailable_total{reason}), Redis breaker
openings and HTTP/2 errors. The counters are the whole replica's: other
clients' calls count too.

Subjects: by default the development issuer's generated users, new for each
run (free-lt-<n>-<run>, pro-lt-<n>-<run>, enterprise-lt-<n>-<run>, password
dev, client cli), -subjects of each plan. Or any OIDC issuer's users
(-users with -password, password grant through -client-id, default cli) or
clients (-client-id with -client-secret, client-credentials grant), each
optionally name=plan; without =plan the plan is the one of -plans whose rate
and daily cap match what the edge's GetUsage reports. The secret and the
password may come from LOADTEST_CLIENT_SECRET and LOADTEST_PASSWORD. Tokens
are renewed before they expire and never printed.

Output: a progress line on stderr (about once a second: elapsed, share
done, ETA, calls, rate, and a WARNING when the calls sent fall under 95% of
the plan), a table on stdout ending with the verdict and its reasons, a JSON
report (-out, default loadtest-results/<scenario>-<time>.json) and an HTML
report beside it (same name, .html; self-contained, opens offline): the
verdict and why, the tables, what the edges did, and charts of latency over
time, admitted vs allowed per plan, calls per second and each replica's
share, with every failure marked where it happened. The exit status is 0
on PASS, 1 on FAIL (or when the run could not start), 2 on a usage error, 3
on INCONCLUSIVE.

Examples (the development stack: go run ./cmd/edge -dev):
  go run ./loadtest -scenario conformance -duration 15s
  go run ./loadtest -scenario conformance -protocol grpc -subjects free=4,pro=2
  go run ./loadtest -scenario operations -protocol grpc-web
  go run ./loadtest -scenario idempotency -keys 20 -duplicates 10
  go run ./loadtest -scenario overhead -backend http://127.0.0.1:8082 -rate 200
  go run ./loadtest -scenario overhead -backend http://127.0.0.1:8082 -concurrency 16 -max-overhead-p99 5ms
  go run ./loadtest -edge http://127.0.0.1:8080,http://127.0.0.1:8090 -admin http://127.0.0.1:9090,http://127.0.0.1:9091 -plans tiny=60/10/0 -subjects tiny=2

Flags:
`

// parseFlags parses and validates the command line. getenv supplies the
// secret and password variables.
func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (*Options, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	var (
		scenario    = fs.String("scenario", Conformance, "`name`: conformance, operations, idempotency or overhead")
		edges       = fs.String("edge", defaultEdge, "edge `URLs`, comma-separated for several replicas (called round-robin)")
		backend     = fs.String("backend", "", "backend `URL` for -scenario overhead (e.g. http://127.0.0.1:8082)")
		protocol    = fs.String("protocol", string(Connect), "`protocol`: connect (proto), connect-json, grpc, grpc-web or http (plain JSON)")
		subjects    = fs.String("subjects", defaultSubjects, "generated development-issuer users per plan, `plan=count,…`; with -plans the default is one per plan")
		plans       = fs.String("plans", defaultPlans, "the plans the edge should apply, `name=rate/burst/daily,…` (requests per minute, burst, requests per day or 0 for none)")
		rate        = fs.Float64("rate", 0, "overhead: `calls/s` over both targets, open model (default 100 without -concurrency)")
		concurrency = fs.Int("concurrency", 0, "overhead: `workers`, each waiting for its answer (closed model)")
		duration    = fs.Duration("duration", defaultDuration, "how long load is offered; conformance and overhead stop sending then, operations and idempotency must be done by then")
		overload    = fs.Float64("overload", 2, "conformance: calls offered to each subject, as a `multiple` of what its plan allows over the run")
		issuerURL   = fs.String("issuer", defaultIssuer, "OIDC issuer `URL` (token endpoint by discovery)")
		clientID    = fs.String("client-id", "", "client-credentials subjects `ids`[=plan],… ; with -users, the client of the password grant (default cli)")
		secret      = fs.String("client-secret", "", "`secret` of the -client-id clients (or LOADTEST_CLIENT_SECRET)")
		users       = fs.String("users", "", "password-grant subjects `names`[=plan],…")
		password    = fs.String("password", "", "`password` of -users (or LOADTEST_PASSWORD)")
		keys        = fs.Int("keys", 20, "idempotency: distinct Idempotency-Key `count`")
		duplicates  = fs.Int("duplicates", 10, "idempotency: concurrent identical calls (`count`) per key")
		maxInFlight = fs.Int("max-inflight", 1000, "open model: at most this many `calls` in flight; later ones wait, and their latency counts the wait")
		out         = fs.String("out", "", "JSON report `path` (default loadtest-results/<scenario>-<time>.json); the HTML report goes beside it (.html)")
		admins      = fs.String("admin", "", "each -edge's admin listener `URLs`, comma-separated in the order of -edge, whose /metrics say what the edge did (default http://127.0.0.1:9090 with the default -edge; otherwise none read)")
		maxErrors   = fs.Float64("max-error-rate", 0, "threshold: calls failed (not refused) over calls sent, as a `fraction`; above it the run fails")
		maxP99      = fs.Duration("max-p99", 0, "threshold: p99 `latency` of the answered calls (overhead: through the edge); above it the run fails (0: none)")
		maxOvP50    = fs.Duration("max-overhead-p50", 0, "threshold, overhead: the `latency` the edge adds at p50; above it the run fails (0: none)")
		maxOvP99    = fs.Duration("max-overhead-p99", 0, "threshold, overhead: the `latency` the edge adds at p99; above it the run fails (0: none)")
		minAchieved = fs.Float64("min-achieved", 0.95, "threshold, open model: calls sent over calls planned, as a `fraction`; below it the run is INCONCLUSIVE")
	)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: every setting is a flag (see -h)", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	o := &Options{
		Scenario: *scenario, Backend: strings.TrimSuffix(*backend, "/"), Rate: *rate, Concurrency: *concurrency,
		Duration: *duration, Overload: *overload, Issuer: strings.TrimSuffix(*issuerURL, "/"),
		Keys: *keys, Duplicates: *duplicates, MaxInFlight: *maxInFlight, Out: *out,
		ClientSecret: *secret, Password: *password,
		Thresholds: Thresholds{MaxErrorRate: *maxErrors, MaxP99: *maxP99, MaxOverheadP50: *maxOvP50, MaxOverheadP99: *maxOvP99, MinAchievedRate: *minAchieved},
	}
	if o.ClientSecret == "" {
		o.ClientSecret = getenv("LOADTEST_CLIENT_SECRET")
	}
	if o.Password == "" {
		o.Password = getenv("LOADTEST_PASSWORD")
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !slices.Contains(scenarios, o.Scenario) {
		bad("-scenario %q: want one of %s", o.Scenario, strings.Join(scenarios, ", "))
	}
	for _, e := range strings.Split(*edges, ",") {
		e = strings.TrimSuffix(strings.TrimSpace(e), "/")
		if err := checkBaseURL(e); err != nil {
			bad("-edge %q: %v", e, err)
			continue
		}
		o.Edges = append(o.Edges, e)
	}
	switch {
	case set["admin"]:
		for _, a := range strings.Split(*admins, ",") {
			a = strings.TrimSuffix(strings.TrimSpace(a), "/")
			if err := checkBaseURL(a); err != nil {
				bad("-admin %q: %v", a, err)
				continue
			}
			o.Admins = append(o.Admins, a)
		}
		if len(o.Admins) != len(o.Edges) {
			bad("-admin names %d admin listeners for %d edges: give one per -edge, in the same order", len(o.Admins), len(o.Edges))
		}
	case !set["edge"]:
		o.Admins = []string{defaultAdmin}
	}
	th := o.Thresholds
	if th.MaxErrorRate < 0 || th.MaxErrorRate > 1 {
		bad("-max-error-rate %v: want a fraction between 0 and 1", th.MaxErrorRate)
	}
	if th.MinAchievedRate < 0 || th.MinAchievedRate > 1 {
		bad("-min-achieved %v: want a fraction between 0 and 1", th.MinAchievedRate)
	}
	if th.MaxP99 < 0 || th.MaxOverheadP50 < 0 || th.MaxOverheadP99 < 0 {
		bad("-max-p99, -max-overhead-p50 and -max-overhead-p99 take a latency above 0 (0: none)")
	}
	if o.Scenario != Overhead && (th.MaxOverheadP50 > 0 || th.MaxOverheadP99 > 0) {
		bad("-max-overhead-p50 and -max-overhead-p99 apply to -scenario overhead only")
	}
	var err error
	if o.Protocol, err = parseProtocol(*protocol); err != nil {
		bad("-protocol: %v", err)
	}
	if o.Plans, err = parsePlans(*plans); err != nil {
		bad("-plans: %v", err)
	}
	if err := checkBaseURL(o.Issuer); err != nil {
		bad("-issuer %q: %v", o.Issuer, err)
	}
	if o.Duration < time.Second || o.Duration > 24*time.Hour {
		bad("-duration %v: want between 1s and 24h", o.Duration)
	}
	if o.MaxInFlight < 1 || o.MaxInFlight > 100_000 {
		bad("-max-inflight %d: want between 1 and 100000", o.MaxInFlight)
	}

	// Load shape: only overhead takes a rate or a concurrency.
	switch {
	case o.Scenario != Overhead && (set["rate"] || set["concurrency"]):
		bad("-rate and -concurrency apply to -scenario overhead; %s sets its own load (conformance: -overload, idempotency: -keys and -duplicates)", o.Scenario)
	case o.Scenario == Overhead && set["rate"] && set["concurrency"]:
		bad("-rate (open model) and -concurrency (closed model) exclude each other: give one")
	case o.Scenario == Overhead && set["rate"] && (o.Rate <= 0 || o.Rate > 1_000_000):
		bad("-rate %v: want calls per second above 0", o.Rate)
	case o.Scenario == Overhead && set["concurrency"] && (o.Concurrency < 1 || o.Concurrency > 10_000):
		bad("-concurrency %d: want between 1 and 10000", o.Concurrency)
	case o.Scenario == Overhead && !set["rate"] && !set["concurrency"]:
		o.Rate = defaultOverheadRPS
	}
	if o.Scenario == Overhead {
		if o.Backend == "" {
			bad("-scenario overhead needs -backend, the backend's own address (e.g. -backend http://127.0.0.1:8082)")
		} else if err := checkBaseURL(o.Backend); err != nil {
			bad("-backend %q: %v", o.Backend, err)
		}
	} else if set["backend"] {
		bad("-backend applies to -scenario overhead only")
	}
	if o.Scenario != Conformance && set["overload"] {
		bad("-overload applies to -scenario conformance only")
	}
	if o.Scenario == Conformance && (o.Overload <= 1 || o.Overload > 100) {
		bad("-overload %v: want more than 1 (above the limit) and at most 100", o.Overload)
	}
	if o.Scenario != Idempotency && (set["keys"] || set["duplicates"]) {
		bad("-keys and -duplicates apply to -scenario idempotency only")
	}
	if o.Keys < 1 || o.Keys > 10_000 {
		bad("-keys %d: want between 1 and 10000", o.Keys)
	}
	if o.Duplicates < 2 || o.Duplicates > 1000 {
		bad("-duplicates %d: want between 2 and 1000 (a storm needs duplicates)", o.Duplicates)
	}

	// Subjects.
	switch {
	case *users != "":
		if o.Users, err = parseNamed(*users, o.Plans); err != nil {
			bad("-users: %v", err)
		}
		if o.Password == "" {
			bad("-users needs -password (or LOADTEST_PASSWORD)")
		}
		o.ClientID = *clientID
		if o.ClientID == "" {
			o.ClientID = defaultPublicCli
		} else if strings.ContainsAny(o.ClientID, ",=") {
			bad("-client-id %q: with -users, name the one client of the password grant", o.ClientID)
		}
	case *clientID != "":
		if o.Clients, err = parseNamed(*clientID, o.Plans); err != nil {
			bad("-client-id: %v", err)
		}
		if o.ClientSecret == "" {
			bad("-client-id needs -client-secret (or LOADTEST_CLIENT_SECRET)")
		}
	default:
		o.ClientID, o.Password = defaultPublicCli, devUserPassword
		if set["password"] || set["client-secret"] {
			bad("-password and -client-secret go with -users or -client-id")
		}
		spec := *subjects
		if !set["subjects"] && set["plans"] && o.Plans != nil {
			var parts []string
			for _, p := range o.Plans {
				parts = append(parts, p.Name+"=1")
			}
			spec = strings.Join(parts, ",")
		}
		o.SubjectsSet = set["subjects"]
		if o.Subjects, err = parseSubjects(spec, o.Plans); err != nil {
			bad("-subjects: %v", err)
		}
	}
	if (*users != "" || *clientID != "") && set["subjects"] {
		bad("-subjects counts the development issuer's generated users; with -users or -client-id the subjects are the ones named")
	}
	if o.Out != "" && strings.HasSuffix(o.Out, string(os.PathSeparator)) {
		bad("-out %q: name a file, e.g. results.json", o.Out)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

var hostPort = regexp.MustCompile(`^[A-Za-z0-9.\-\[\]:]+$`)

// checkBaseURL accepts http(s)://host[:port][/path] with no user, query or
// fragment.
func checkBaseURL(s string) error {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return errors.New("want an http:// or https:// URL, e.g. http://127.0.0.1:8080")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return err
	case u.Host == "" || !hostPort.MatchString(u.Host):
		return errors.New("no host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return errors.New("want scheme, host, port and path only (no user, query or fragment)")
	}
	return nil
}

func parseSubjects(s string, plans []Plan) ([]PlanCount, error) {
	var out []PlanCount
	total := 0
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, count, ok := strings.Cut(item, "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("%q: want plan=count with count between 0 and 1000, e.g. free=2", item)
		}
		if !slices.ContainsFunc(plans, func(p Plan) bool { return p.Name == name }) {
			return nil, fmt.Errorf("plan %q is not in -plans (%s)", name, planNames(plans))
		}
		if slices.ContainsFunc(out, func(pc PlanCount) bool { return pc.Plan == name }) {
			return nil, fmt.Errorf("plan %s given twice", name)
		}
		if n > 0 {
			out = append(out, PlanCount{Plan: name, Count: n})
		}
		total += n
	}
	if total == 0 {
		return nil, errors.New("no subject: want at least one, e.g. free=1")
	}
	return out, nil
}

var subjectName = regexp.MustCompile(`^[A-Za-z0-9._@:+-]{1,255}$`)

func parseNamed(s string, plans []Plan) ([]Named, error) {
	var out []Named
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, plan, _ := strings.Cut(item, "=")
		if !subjectName.MatchString(name) {
			return nil, fmt.Errorf("%q: not a user or client name", name)
		}
		if plan != "" && !slices.ContainsFunc(plans, func(p Plan) bool { return p.Name == plan }) {
			return nil, fmt.Errorf("%s: plan %q is not in -plans (%s)", name, plan, planNames(plans))
		}
		if slices.ContainsFunc(out, func(n Named) bool { return n.Name == name }) {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out = append(out, Named{Name: name, Plan: plan})
	}
	if len(out) == 0 {
		return nil, errors.New("no name")
	}
	return out, nil
}

func planNames(plans []Plan) string {
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
