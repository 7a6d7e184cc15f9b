package policy_test

import (
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/edge/ratelimit"
)

// The limit step and the operator API read the same buckets because both
// ask Rates: the plan's bucket, its daily cap, and one bucket per operation
// with a rate of its own, named by the operation's method.
func TestAPlanLimitsItsSubjectsByItsRateDailyCapAndEachOperationsRate(t *testing.T) {
	plan := config.Plan{RequestsPerMinute: 100, Burst: 20, RequestsPerDay: 5000}
	ops := []config.Operation{
		{Procedure: "/svc.v1.EnvironmentService/CreateEnvironment", RatePerMinute: 10},
		{Procedure: "/svc.v1.OrganizationService/GetOrganization"},
	}
	req := policy.Rates("subject-1", plan, ops...)
	want := []ratelimit.Limit{
		{Name: policy.PlanLimit, Rate: 100, Period: time.Minute, Burst: 20},
		{Name: policy.OperationPrefix + "CreateEnvironment", Rate: 10, Period: time.Minute, Burst: 10},
	}
	if req.Subject != "subject-1" || req.Daily != 5000 || len(req.Limits) != len(want) {
		t.Fatalf("Rates = %+v, want subject-1, daily 5000 and limits %+v", req, want)
	}
	for i := range want {
		if req.Limits[i] != want[i] {
			t.Errorf("limit %d = %+v, want %+v", i, req.Limits[i], want[i])
		}
	}
}

// A reload's new policy ends the retry times told under the old one.
func TestStoringANewPolicyMarksTheOldOneReplaced(t *testing.T) {
	cfg := &config.Config{}
	old, next := policy.NewLive(cfg), policy.NewLive(cfg)
	var cur policy.Current
	cur.Store(old)
	select {
	case <-old.Replaced():
		t.Fatal("the policy in force is marked replaced")
	default:
	}
	cur.Store(next)
	select {
	case <-old.Replaced():
	default:
		t.Fatal("the old policy is not marked replaced")
	}
	if cur.Load() != next {
		t.Fatal("the new policy is not in force")
	}
	cur.Store(next) // storing it again replaces nothing
	select {
	case <-next.Replaced():
		t.Fatal("the policy in force is marked replaced by itself")
	default:
	}
}
