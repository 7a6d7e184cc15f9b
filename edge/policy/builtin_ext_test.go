package policy_test

import (
	"slices"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/identity"
)

// The edge's own procedures get their rule from the table: reflection any
// service account of a role the table names may call, counted against the
// largest stream cap; health anyone, token or not.
func TestTheEdgesOwnProceduresTakeTheirRulesFromTheTable(t *testing.T) {
	table := policy.New([]config.Operation{
		{Procedure: "/svc.v1.EnvironmentService/WatchEnvironment", ServiceAccountRoles: []string{"svc-viewer"}, ConcurrentStreams: 5},
		{Procedure: "/svc.v1.EnvironmentService/CreateEnvironment", ServiceAccountRoles: []string{"svc-env-manager", "svc-admin"}, ConcurrentStreams: 0},
	})
	reflect := table.Rule("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	if !reflect.Builtin || reflect.Open || !reflect.ReadOnly || reflect.ConcurrentStreams != 5 {
		t.Fatalf("reflection's rule %+v, want builtin, not open, read-only, the largest stream cap (5)", reflect)
	}
	if want := []string{"svc-admin", "svc-env-manager", "svc-viewer"}; !slices.Equal(reflect.ServiceAccountRoles, want) {
		t.Errorf("reflection's roles %v, want every role the table names, %v", reflect.ServiceAccountRoles, want)
	}
	if !reflect.Allows(&identity.Principal{Roles: []string{"svc-viewer"}}) || reflect.Allows(&identity.Principal{Roles: []string{"svc-billing"}}) {
		t.Error("reflection: a viewer must be allowed, a role the table does not name refused")
	}
	for _, p := range []string{"/" + config.HealthService + "/Check", "/" + config.HealthService + "/Watch"} {
		if r := table.Rule(p); !r.Builtin || !r.Open {
			t.Errorf("%s: rule %+v, want builtin and open", p, r)
		}
	}
	if r := table.Rule("/svc.v1.EnvironmentService/WatchEnvironment"); r.Builtin || r.Open {
		t.Errorf("an API procedure's rule is builtin or open: %+v", r)
	}
}

func TestOperationsListsTheTableByProcedureAndKeepsItsRolesItsOwn(t *testing.T) {
	roles := []string{"svc-admin"}
	table := policy.New([]config.Operation{
		{Procedure: "/svc.v1.OrganizationService/UpdateOrganization", ServiceAccountRoles: roles},
		{Procedure: "/svc.v1.BlueprintService/SearchCatalog", RatePerMinute: 30},
	})
	roles[0] = "svc-viewer" // the caller's slice changes after New
	ops := table.Operations()
	if len(ops) != 2 || ops[0].Procedure != "/svc.v1.BlueprintService/SearchCatalog" || ops[1].Procedure != "/svc.v1.OrganizationService/UpdateOrganization" {
		t.Fatalf("Operations %v, want both rows sorted by procedure", ops)
	}
	if !table.Rule("/svc.v1.OrganizationService/UpdateOrganization").Allows(&identity.Principal{Roles: []string{"svc-admin"}}) {
		t.Fatal("the table followed a change to the configuration's slice after New")
	}
	if rate, ok := findRate(ops, "/svc.v1.BlueprintService/SearchCatalog"); !ok || rate != 30 {
		t.Fatalf("SearchCatalog's rate %d, want 30", rate)
	}
}

func findRate(ops []config.Operation, procedure string) (int, bool) {
	for _, op := range ops {
		if op.Procedure == procedure {
			return op.RatePerMinute, true
		}
	}
	return 0, false
}
