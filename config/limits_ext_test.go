package config_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

func TestDefaultLimitsAreTheSpecsTables(t *testing.T) {
	t.Parallel()
	want := config.Limits{
		DefaultPlan: "free",
		Plans: map[string]config.Plan{
			"free": {RequestsPerMinute: 60, RequestsPerDay: 10000, Burst: 100,
				Quotas: config.Quotas{ConcurrentEnvironments: 2, EnvironmentsPerMonth: 10, VCPUHoursPerMonth: 100, MemoryGBHoursPerMonth: 200}},
			"pro":        {RequestsPerMinute: 300, RequestsPerDay: 100000, Burst: 500},
			"enterprise": {RequestsPerMinute: 1000, RequestsPerDay: 0, Burst: 2000},
		},
		StreamLease:       30 * time.Second,
		ReconcileInterval: time.Minute,
		EnvironmentSize:   config.EnvironmentSize{VCPUs: 2, MemoryGB: 4},
		OnRedisFailure:    config.FailOpen,
		LocalShare:        0.5,
	}
	a := config.Default()
	if !reflect.DeepEqual(a.Limits, want) {
		t.Errorf("Default().Limits = %+v\nwant %+v", a.Limits, want)
	}
	a.Limits.Plans["free"] = config.Plan{}
	delete(a.Limits.Plans, "pro")
	if b := config.Default(); !reflect.DeepEqual(b.Limits, want) {
		t.Error("a change to one Default's plans shows in the next")
	}
}

func TestDefaultOperationsCarryTheSpecsLimits(t *testing.T) {
	t.Parallel()
	type limits struct {
		rate, streams int
		quota         string
	}
	want := map[string]limits{
		svcv1connect.EnvironmentServiceCreateEnvironmentProcedure: {10, 0, config.QuotaReserveEnvironment},
		svcv1connect.EnvironmentServiceDeleteEnvironmentProcedure: {0, 0, config.QuotaReleaseEnvironment},
		svcv1connect.EnvironmentServiceWatchEnvironmentProcedure:  {0, 20, ""},
		svcv1connect.BlueprintServiceSearchCatalogProcedure:       {30, 0, ""},
		svcv1connect.BlueprintServiceValidateBlueprintProcedure:   {30, 0, ""},
	}
	seen := 0
	for _, op := range config.DefaultOperations() {
		w := want[op.Procedure] // none for every other procedure
		if _, ok := want[op.Procedure]; ok {
			seen++
		}
		if got := (limits{op.RatePerMinute, op.ConcurrentStreams, op.Quota}); got != w {
			t.Errorf("%s: %+v; want %+v", op.Procedure, got, w)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d procedures with limits have a default row", seen, len(want))
	}
}

// limitsWithOverrides are the default limits with a subject's plan and
// quotas set, and an override naming no plan, as PlanFor may meet before
// validation.
func limitsWithOverrides() config.Limits {
	l := config.Default().Limits
	l.SubjectPlans = map[string]string{"alice": "pro", "carol": "gold"}
	l.SubjectQuotas = map[string]config.Quotas{"alice": {ConcurrentEnvironments: 7, VCPUHoursPerMonth: 500}}
	return l
}

func TestPlanFor(t *testing.T) {
	t.Parallel()
	l := limitsWithOverrides()
	tests := []struct {
		name           string
		claim, subject string
		want           string
	}{
		{"no claim, no override: the default", "", "bob", "free"},
		{"no claim, no subject: the default", "", "", "free"},
		{"claim", "pro", "bob", "pro"},
		{"claim is lowercased", "Enterprise", "bob", "enterprise"},
		{"claim in capitals", "PRO", "", "pro"},
		{"claim before override", "enterprise", "alice", "enterprise"},
		{"claim naming the override's plan", "free", "alice", "free"},
		{"no claim: the override", "", "alice", "pro"},
		{"claim naming no plan: the override", "gold", "alice", "pro"},
		{"claim naming no plan, no override: the default", "gold", "bob", "free"},
		{"claim is not trimmed", " pro", "bob", "free"},
		{"override naming no plan: the default", "", "carol", "free"},
	}
	for _, tt := range tests {
		name, plan := l.PlanFor(tt.claim, tt.subject)
		if name != tt.want || !reflect.DeepEqual(plan, l.Plans[tt.want]) {
			t.Errorf("%s: PlanFor(%q, %q) = %q, %+v; want %q, %+v", tt.name, tt.claim, tt.subject, name, plan, tt.want, l.Plans[tt.want])
		}
	}

	// Another default plan.
	l.DefaultPlan = "pro"
	if name, plan := l.PlanFor("", "bob"); name != "pro" || plan.RequestsPerMinute != 300 {
		t.Errorf("with default_plan pro: %q, %+v", name, plan)
	}
}

func TestQuotasFor(t *testing.T) {
	t.Parallel()
	l := limitsWithOverrides()
	free := l.Plans["free"].Quotas
	alice := config.Quotas{ConcurrentEnvironments: 7, VCPUHoursPerMonth: 500}
	tests := []struct {
		name          string
		subject, plan string
		want          config.Quotas
	}{
		{"the plan's", "bob", "free", free},
		{"pro is unlimited", "bob", "pro", config.Quotas{}},
		{"the subject's replace the plan's whole", "alice", "pro", alice},
		{"the subject's on any plan", "alice", "free", alice},
		{"no subject", "", "free", free},
		{"a plan not configured gets the default plan's, not unlimited", "bob", "gold", free},
	}
	for _, tt := range tests {
		if got := l.QuotasFor(tt.subject, tt.plan); got != tt.want {
			t.Errorf("%s: QuotasFor(%q, %q) = %+v; want %+v", tt.name, tt.subject, tt.plan, got, tt.want)
		}
	}
}

func TestPlansInTheFileReplaceTheDefaultPlans(t *testing.T) {
	t.Parallel()
	gold := config.Plan{RequestsPerMinute: 5, RequestsPerDay: 1000, Burst: 10, Quotas: config.Quotas{
		ConcurrentEnvironments: 3, EnvironmentsPerMonth: config.Unlimited, VCPUHoursPerMonth: 1.5, MemoryGBHoursPerMonth: config.Unlimited}}
	const quotas = "{concurrent_environments: 3, environments_per_month: unlimited, vcpu_hours_per_month: 1.5, memory_gb_hours_per_month: unlimited}"
	for _, yaml := range []string{
		"limits:\n  default_plan: gold\n  plans:\n    gold: {requests_per_minute: 5, requests_per_day: 1000, burst: 10, quotas: " + quotas + "}\n",
		// The same through a merge.
		"limits:\n  <<: {plans: {gold: {requests_per_minute: 5, requests_per_day: 1000, burst: 10, quotas: " + quotas + "}}}\n  default_plan: gold\n",
	} {
		c, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if want := map[string]config.Plan{"gold": gold}; !reflect.DeepEqual(c.Limits.Plans, want) {
			t.Errorf("%q: plans %+v; want %+v", yaml, c.Limits.Plans, want)
		}
	}

	// Maps leave the other defaults alone, and their order does not matter.
	a, errA := config.Parse([]byte("limits:\n  subject_plans: {bob: pro, alice: enterprise}\n"))
	b, errB := config.Parse([]byte("limits:\n  subject_plans: {alice: enterprise, bob: pro}\n"))
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) || len(a.Limits.Plans) != 3 || a.Limits.SubjectPlans["bob"] != "pro" {
		t.Errorf("subject_plans: %v, %v, %+v", errA, errB, a.Limits)
	}
}

func TestAPlanIsGivenWholeAndNoBoundIsWrittenUnlimited(t *testing.T) {
	t.Parallel()
	tests := []struct{ yaml, want string }{
		// A plan cut short, as a half-written file leaves it: its missing
		// fields are errors, not zeros that would read as no bound.
		{"limits:\n  plans:\n    free:\n      requests_per_minute: 120\n",
			"line 3: limits.plans.free: sets no requests_per_day, burst, quotas: it is given whole (write unlimited for no bound)"},
		{"limits:\n  plans:\n    free:\n      requests_per_minute: 60\n      requests_per_day: 100\n      burst: 10\n      quotas:\n        concurrent_environments: 2\n",
			"line 7: limits.plans.free.quotas: sets no environments_per_month, vcpu_hours_per_month, memory_gb_hours_per_month: it is given whole (write unlimited for no bound)"},
		{"limits:\n  plans:\n    free:\n", "line 3: limits.plans.free: sets no requests_per_minute, requests_per_day, burst, quotas: it is given whole (write unlimited for no bound)"},
		{"limits:\n  subject_quotas:\n    alice: {concurrent_environments: 20}\n",
			"line 3: limits.subject_quotas.alice: sets no environments_per_month, vcpu_hours_per_month, memory_gb_hours_per_month: it is given whole (write unlimited for no bound)"},
		// 0 used to mean unlimited: it is refused, whatever it was meant as.
		{"limits:\n  subject_quotas:\n    alice:\n      concurrent_environments: 0\n      environments_per_month: unlimited\n      vcpu_hours_per_month: 0.0\n      memory_gb_hours_per_month: unlimited\n",
			"2 problems:\n" +
				"  line 4: limits.subject_quotas.alice.concurrent_environments: 0 is not a bound: write unlimited for none, or a number more than 0\n" +
				"  line 6: limits.subject_quotas.alice.vcpu_hours_per_month: 0 is not a bound: write unlimited for none, or a number more than 0"},
		{"limits:\n  subject_quotas:\n    alice:\n      concurrent_environments: none\n      environments_per_month: 1\n      vcpu_hours_per_month: 1\n      memory_gb_hours_per_month: 1\n",
			"line 4: limits.subject_quotas.alice.concurrent_environments: cannot unmarshal !!str `none` into int"},
	}
	for _, tt := range tests {
		if _, err := config.Parse([]byte(tt.yaml)); err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) = %v\nwant %s", tt.yaml, err, tt.want)
		}
	}

	// Whole through an anchor and a merge key, and unlimited spelled out.
	c, err := config.Parse([]byte(`limits:
  plans:
    free: &free
      requests_per_minute: 60
      requests_per_day: unlimited
      burst: 10
      quotas: {concurrent_environments: 2, environments_per_month: unlimited, vcpu_hours_per_month: 1.5, memory_gb_hours_per_month: unlimited}
    pro:
      <<: *free
      requests_per_minute: 300
`))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Plan{RequestsPerMinute: 300, RequestsPerDay: config.Unlimited, Burst: 10, Quotas: config.Quotas{
		ConcurrentEnvironments: 2, EnvironmentsPerMonth: config.Unlimited, VCPUHoursPerMonth: 1.5, MemoryGBHoursPerMonth: config.Unlimited}}
	if got := c.Limits.Plans["pro"]; got != want {
		t.Errorf("pro = %+v; want %+v", got, want)
	}
	// Written back, unlimited is the word.
	if s := c.String(); !strings.Contains(s, "requests_per_day: unlimited") || strings.Contains(s, "requests_per_day: 0") {
		t.Errorf("String() writes unlimited otherwise:\n%s", s)
	}
}

func TestEmptyPlansAreRefused(t *testing.T) {
	t.Parallel()
	for _, yaml := range []string{"limits:\n  plans: {}\n", "limits:\n  plans:\n"} {
		c, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		c.Upstream.URL, c.OIDC.IssuerURL, c.OIDC.Audience = "http://127.0.0.1:8082", "http://127.0.0.1:8081/realms/dev", "api"
		c.Redis.Addr = "127.0.0.1:6379"
		want := "2 problems:\n" +
			"  limits.plans: must name at least one plan (a plans map in the file replaces the default plans whole)\n" +
			`  limits.default_plan: "free" is not one of limits.plans ()`
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("%q: Validate() = %v\nwant %s", yaml, err, want)
		}
	}
}

func TestEmptySubjectMapsAreTheDefault(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("limits:\n  subject_plans: {}\n  subject_quotas:\n"))
	if err != nil || !reflect.DeepEqual(c, config.Default()) {
		t.Errorf("Parse = %+v, %v; want Default", c.Limits, err)
	}
}

func TestLimitsFieldsAreNamedWithTheirLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml string
		want string
	}{
		{"limits:\n  plans:\n    free:\n      rpm: 5\n",
			"2 problems:\n  line 3: limits.plans.free: sets no requests_per_minute, requests_per_day, burst, quotas: it is given whole (write unlimited for no bound)\n" +
				"  line 4: limits.plans.free.rpm: unknown field; expected one of requests_per_minute, requests_per_day, burst, quotas, shadow"},
		{"limits:\n  subject_quotas:\n    alice:\n      vcpus: 5\n",
			"2 problems:\n  line 3: limits.subject_quotas.alice: sets no concurrent_environments, environments_per_month, vcpu_hours_per_month, memory_gb_hours_per_month: it is given whole (write unlimited for no bound)\n" +
				"  line 4: limits.subject_quotas.alice.vcpus: unknown field; expected one of concurrent_environments, environments_per_month, vcpu_hours_per_month, memory_gb_hours_per_month"},
		{"limits:\n  plan: pro\n",
			"line 2: limits.plan: unknown field; expected one of default_plan, plans, subject_plans, subject_quotas, stream_lease, reconcile_interval, environment_size, on_redis_failure, local_share"},
		{"limits:\n  subject_plans:\n    alice: [pro]\n", "line 3: limits.subject_plans.alice: cannot unmarshal !!seq into string"},
		{"limits:\n  subject_plans:\n    a.b@example.com: [pro]\n", `line 3: limits.subject_plans["a.b@example.com"]: cannot unmarshal !!seq into string`},
		{"limits:\n  plans:\n    free: {requests_per_minute: 1, requests_per_day: 1, quotas: {}}\n    pro:\n      requests_per_minute: 1\n      requests_per_day: 1\n      quotas: {concurrent_environments: 1, environments_per_month: 1, vcpu_hours_per_month: 1, memory_gb_hours_per_month: 1}\n      burst: lots\n",
			"3 problems:\n  line 3: limits.plans.free: sets no burst: it is given whole (write unlimited for no bound)\n" +
				"  line 3: limits.plans.free.quotas: sets no concurrent_environments, environments_per_month, vcpu_hours_per_month, memory_gb_hours_per_month: it is given whole (write unlimited for no bound)\n" +
				"  line 8: limits.plans.pro.burst: cannot unmarshal !!str `lots` into int"},
		{"limits:\n  local_share: half\n", "line 2: limits.local_share: cannot unmarshal !!str `half` into float64"},
		{"operations:\n  - procedure: /svc.v1.UsageService/GetUsage\n    quota: [x]\n",
			"line 3: operations[0].quota: cannot unmarshal !!seq into string"},
		{"operations:\n  - procedure: /svc.v1.UsageService/GetUsage\n    concurrent_streams: many\n",
			"line 3: operations[0].concurrent_streams: cannot unmarshal !!str `many` into int"},
	}
	for _, tt := range tests {
		_, err := config.Parse([]byte(tt.yaml))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) = %v\nwant %s", tt.yaml, err, tt.want)
		}
	}
}

func TestLoadNamesTheLineOfAnInvalidLimit(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, `upstream: {url: "http://127.0.0.1:8082"}
oidc: {issuer_url: "http://127.0.0.1:8081/realms/dev", audience: api}
limits:
  default_plan: gold
  plans:
    pro:
      requests_per_minute: 300
      requests_per_day: unlimited
      burst: 0
      quotas:
        concurrent_environments: unlimited
        environments_per_month: unlimited
        memory_gb_hours_per_month: unlimited
        vcpu_hours_per_month: .nan
  subject_plans:
    "bob@example.com": team
  subject_quotas:
    alice: {concurrent_environments: 1, environments_per_month: -1, vcpu_hours_per_month: 1, memory_gb_hours_per_month: 1}
  stream_lease: 1s
  environment_size: {vcpus: 0, memory_gb: 4}
  local_share: 2
redis: {addr: "127.0.0.1:6379"}
`)
	_, err := config.Load(path)
	want := "config " + path + ": 8 problems:\n" +
		`  line 4: limits.default_plan: "gold" is not one of limits.plans (pro)` + "\n" +
		"  line 9: limits.plans.pro.burst: must be at least 1, not 0\n" +
		"  line 14: limits.plans.pro.quotas.vcpu_hours_per_month: must be a finite number more than 0, or unlimited, not NaN\n" +
		`  line 16: limits.subject_plans["bob@example.com"]: "team" is not one of limits.plans (pro)` + "\n" +
		"  line 18: limits.subject_quotas.alice.environments_per_month: must be at least 1, or unlimited, not -1\n" +
		"  line 19: limits.stream_lease: must be between 3s and 10m0s, not 1s\n" +
		"  line 20: limits.environment_size.vcpus: must be a finite number more than 0, not 0\n" +
		"  line 21: limits.local_share: must be more than 0 and at most 1, not 2"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
}

func TestLoadSaysWhenOnRedisFailureCameFromTheEnvironment(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, "upstream: {url: 'http://127.0.0.1:8082'}\noidc: {issuer_url: 'http://127.0.0.1:8081/realms/dev', audience: api}\nlimits:\n  on_redis_failure: fail_open\nredis: {addr: '127.0.0.1:6379'}\n")
	t.Setenv("EDGE_ON_REDIS_FAILURE", "fail_closed")
	c, err := config.Load(path)
	if err != nil || c.Limits.OnRedisFailure != config.FailClosed {
		t.Fatalf("Load = %v, %v", c, err)
	}
	t.Setenv("EDGE_ON_REDIS_FAILURE", "closed")
	_, err = config.Load(path)
	want := "config " + path + `: limits.on_redis_failure: must be fail_open or fail_closed, not "closed" (set by EDGE_ON_REDIS_FAILURE)`
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
}

// flowTable writes the default operation table as YAML, one row per line
// with every field, with change applied first: row i is on line 4+i.
func flowTable(change func(ops []config.Operation)) string {
	var b strings.Builder
	b.WriteString("upstream: {url: 'http://127.0.0.1:8082'}\n")
	b.WriteString("oidc: {issuer_url: 'http://127.0.0.1:8081/realms/dev', audience: api}\n")
	b.WriteString("operations:\n")
	ops := config.DefaultOperations()
	change(ops)
	for _, op := range ops {
		fmt.Fprintf(&b, "  - {procedure: %s, service_account_roles: [%s], idempotent: %v, read_only: %v, rate_per_minute: %d, concurrent_streams: %d, quota: %q}\n",
			op.Procedure, strings.Join(op.ServiceAccountRoles, ", "), op.Idempotent, op.ReadOnly, op.RatePerMinute, op.ConcurrentStreams, op.Quota)
	}
	b.WriteString("redis: {addr: '127.0.0.1:6379'}\n")
	return b.String()
}

func TestOperationLimitsInTheFile(t *testing.T) {
	clearEnv(t)
	// The shipped table, written out, loads as the default.
	c, err := config.Load(writeConfig(t, flowTable(func([]config.Operation) {})))
	if err != nil || !reflect.DeepEqual(c.Operations, config.DefaultOperations()) {
		t.Fatalf("Load = %v; operations %+v", err, c)
	}

	path := writeConfig(t, flowTable(func(ops []config.Operation) {
		ops[0].RatePerMinute = -1                              // SearchCatalog
		ops[2].Quota = config.QuotaReleaseEnvironment          // CreateEnvironment
		ops[3].Quota = "release"                               // DeleteEnvironment
		ops[5].ConcurrentStreams = 3                           // ListEnvironments
		ops[6].ConcurrentStreams, ops[6].RatePerMinute = 50, 2 // WatchEnvironment: fine
	}))
	_, err = config.Load(path)
	want := "config " + path + ": 4 problems:\n" +
		"  line 4: operations[0].rate_per_minute: must be at least 0 (0: no limit of its own), not -1\n" +
		"  line 6: operations[2].quota: release_environment applies to /svc.v1.EnvironmentService/DeleteEnvironment only\n" +
		`  line 7: operations[3].quota: must be empty, reserve_environment or release_environment, not "release"` + "\n" +
		`  line 9: operations[5].concurrent_streams: "/svc.v1.EnvironmentService/ListEnvironments" is not a streaming procedure; concurrent_streams applies to streaming calls only`
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
}

func TestQuotaProceduresAreTheAPIs(t *testing.T) {
	t.Parallel()
	// The quota steps are tied to these two procedures by name.
	c := valid()
	for i, op := range c.Operations {
		switch op.Procedure {
		case svcv1connect.EnvironmentServiceCreateEnvironmentProcedure:
			c.Operations[i].Quota = config.QuotaReserveEnvironment
		case svcv1connect.EnvironmentServiceDeleteEnvironmentProcedure:
			c.Operations[i].Quota = config.QuotaReleaseEnvironment
		}
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestValidateReportsPlansInNameOrder(t *testing.T) {
	t.Parallel()
	// Map iteration order must not change the messages.
	for range 20 {
		c := valid()
		for _, name := range []string{"zeta", "alpha", "mid"} {
			c.Limits.Plans[name] = config.Plan{RequestsPerMinute: 1}
		}
		err := c.Validate()
		want := "3 problems:\n" +
			"  limits.plans.alpha.burst: must be at least 1, not 0\n" +
			"  limits.plans.mid.burst: must be at least 1, not 0\n" +
			"  limits.plans.zeta.burst: must be at least 1, not 0"
		if err == nil || err.Error() != want {
			t.Fatalf("Validate() = %v\nwant %s", err, want)
		}
	}
}
