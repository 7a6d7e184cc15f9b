package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
)

func TestDefaultOperationsFollowTheDesignsRoleRules(t *testing.T) {
	t.Parallel()
	all := []string{"svc-admin", "svc-env-manager", "svc-viewer"}
	env := []string{"svc-admin", "svc-env-manager"}
	admin := []string{"svc-admin"}
	tests := []struct {
		procedure  string
		roles      []string
		idempotent bool
	}{
		{svcv1connect.EnvironmentServiceCreateEnvironmentProcedure, env, true},
		{svcv1connect.EnvironmentServiceDeleteEnvironmentProcedure, env, true},
		{svcv1connect.EnvironmentServiceGetEnvironmentProcedure, all, false},
		{svcv1connect.EnvironmentServiceListEnvironmentsProcedure, all, false},
		{svcv1connect.EnvironmentServiceWatchEnvironmentProcedure, all, false},
		{svcv1connect.BlueprintServiceValidateBlueprintProcedure, env, false},
		{svcv1connect.BlueprintServiceSearchCatalogProcedure, all, false},
		{svcv1connect.UsageServiceGetUsageProcedure, all, false},
		{svcv1connect.OrganizationServiceCreateProjectProcedure, admin, true},
		{svcv1connect.OrganizationServiceCreateOrganizationProcedure, admin, true},
		{svcv1connect.OrganizationServiceDeleteOrganizationProcedure, admin, true},
		{svcv1connect.OrganizationServiceRemoveMemberProcedure, admin, true},
		{svcv1connect.OrganizationServiceGetOrganizationProcedure, all, false},
		{svcv1connect.OrganizationServiceListMembersProcedure, all, false},
	}
	ops := config.DefaultOperations()
	for _, tt := range tests {
		i := slices.IndexFunc(ops, func(op config.Operation) bool { return op.Procedure == tt.procedure })
		if i < 0 {
			t.Errorf("no default row for %s", tt.procedure)
			continue
		}
		if got := ops[i]; !slices.Equal(got.ServiceAccountRoles, tt.roles) || got.Idempotent != tt.idempotent {
			t.Errorf("%s: roles %v, idempotent %v; want %v, %v", tt.procedure, got.ServiceAccountRoles, got.Idempotent, tt.roles, tt.idempotent)
		}
	}
}

func TestDefaultOperationsHoldOneSortedRowPerProcedure(t *testing.T) {
	t.Parallel()
	ops := config.DefaultOperations()
	procs := config.Procedures()
	if len(ops) != len(procs) || len(procs) != 22 {
		t.Fatalf("%d rows for %d procedures; want 22 each (the API of svc.v1)", len(ops), len(procs))
	}
	if !slices.IsSortedFunc(ops, func(a, b config.Operation) int { return strings.Compare(a.Procedure, b.Procedure) }) {
		t.Error("rows are not sorted by procedure")
	}
	for _, op := range ops {
		if _, ok := procs[op.Procedure]; !ok {
			t.Errorf("row for unknown procedure %s", op.Procedure)
		}
	}
}

func TestDefaultOperationsAreTheCallersToChange(t *testing.T) {
	t.Parallel()
	a := config.DefaultOperations()
	a[0].ServiceAccountRoles[0] = "svc-changed"
	if b := config.DefaultOperations(); b[0].ServiceAccountRoles[0] == "svc-changed" {
		t.Error("a change to one result shows in the next")
	}
	p := config.Procedures()
	delete(p, svcv1connect.UsageServiceGetUsageProcedure)
	if _, ok := config.LookupProcedure(svcv1connect.UsageServiceGetUsageProcedure); !ok {
		t.Error("deleting from Procedures' map changed the package's table")
	}
}

func TestProceduresCarryStreamingFromTheDescriptor(t *testing.T) {
	t.Parallel()
	watch, ok := config.LookupProcedure(svcv1connect.EnvironmentServiceWatchEnvironmentProcedure)
	if !ok || !watch.ServerStreaming || watch.ClientStreaming || !watch.Streaming() {
		t.Errorf("WatchEnvironment = %+v, %v; want server-streaming", watch, ok)
	}
	if watch.Service != "svc.v1.EnvironmentService" || watch.Method != "WatchEnvironment" {
		t.Errorf("WatchEnvironment names %q, %q", watch.Service, watch.Method)
	}
	for name, p := range config.Procedures() {
		if name != svcv1connect.EnvironmentServiceWatchEnvironmentProcedure && p.Streaming() {
			t.Errorf("%s is streaming; only WatchEnvironment is", name)
		}
	}
	for _, name := range []string{"", "/svc.v1.EnvironmentService/Nope", "svc.v1.UsageService/GetUsage", "/svc.v1.UsageService/GetUsage/"} {
		if _, ok := config.LookupProcedure(name); ok {
			t.Errorf("LookupProcedure(%q) found a procedure", name)
		}
	}
}

func TestDefaultMatchesIdentityDefaults(t *testing.T) {
	t.Parallel()
	c := config.Default()
	if !slices.Equal(c.OIDC.RoleClaims, identity.DefaultRoleClaims) {
		t.Errorf("oidc.role_claims default %v, identity's %v", c.OIDC.RoleClaims, identity.DefaultRoleClaims)
	}
	if c.OIDC.PlanClaim != identity.DefaultPlanClaim {
		t.Errorf("oidc.plan_claim default %q, identity's %q", c.OIDC.PlanClaim, identity.DefaultPlanClaim)
	}
}
