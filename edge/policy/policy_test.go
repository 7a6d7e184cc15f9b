package policy_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/identity"
)

func TestServiceAccountsNeedARolePeopleDoNot(t *testing.T) {
	table := policy.New([]config.Operation{
		{Procedure: "/svc.v1.EnvironmentService/CreateEnvironment", ServiceAccountRoles: []string{"svc-admin", "svc-env-manager"}, Idempotent: true},
	})
	create := table.Rule("/svc.v1.EnvironmentService/CreateEnvironment")
	cases := []struct {
		name  string
		roles []string
		want  bool
	}{
		{"EnvManager", []string{"svc-env-manager"}, true},
		{"Admin", []string{"offline_access", "svc-admin"}, true},
		{"Viewer", []string{"svc-viewer"}, false},
		{"Person", []string{"offline_access"}, true},
		{"PersonWithoutRoles", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := create.Allows(&identity.Principal{Roles: c.roles}); got != c.want {
				t.Fatalf("Allows = %v, want %v", got, c.want)
			}
		})
	}
	if !create.Idempotent {
		t.Fatal("idempotent flag lost")
	}
	if table.Rule("/svc.v1.X/Unlisted").Allows(&identity.Principal{Roles: []string{"svc-admin"}}) {
		t.Fatal("a procedure without a row admits service accounts")
	}
}

// TestAServiceAccountWithoutTheRoleIsRefusedNamingTheRoles: the refusal a
// caller sees is permission denied, MISSING_ROLE, naming the roles that
// would do; an allowed caller gets none.
func TestAServiceAccountWithoutTheRoleIsRefusedNamingTheRoles(t *testing.T) {
	const procedure = "/svc.v1.EnvironmentService/CreateEnvironment"
	create := policy.New([]config.Operation{
		{Procedure: procedure, ServiceAccountRoles: []string{"svc-admin", "svc-env-manager"}},
	}).Rule(procedure)
	if err := create.Refusal(&identity.Principal{Roles: []string{"svc-admin"}}, procedure); err != nil {
		t.Fatalf("an admin is refused: %v", err)
	}
	err := create.Refusal(&identity.Principal{Roles: []string{"svc-viewer"}}, procedure)
	if err == nil || err.Code() != connect.CodePermissionDenied {
		t.Fatalf("a viewer: %v, want permission_denied", err)
	}
	if !strings.Contains(err.Message(), "svc-admin, svc-env-manager") {
		t.Errorf("message %q names no role that would do", err.Message())
	}
	var reason string
	for _, d := range err.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
				if info.GetMetadata()["required_roles"] != "svc-admin,svc-env-manager" {
					t.Errorf("metadata %v, want required_roles", info.GetMetadata())
				}
			}
		}
	}
	if reason != policy.ReasonMissingRole {
		t.Errorf("reason %q, want %s", reason, policy.ReasonMissingRole)
	}
}

func TestOnlyAnOperationsOwnRateOrReservationLimitsRunningIt(t *testing.T) {
	for _, tc := range []struct {
		op   config.Operation
		want bool
	}{
		{config.Operation{}, false},
		{config.Operation{RatePerMinute: 10}, true},
		{config.Operation{Quota: config.QuotaReserveEnvironment}, true},
		{config.Operation{ConcurrentStreams: 2}, false},
	} {
		rule := policy.Rule{Operation: tc.op}
		if got := rule.LimitsRunning(); got != tc.want {
			t.Errorf("%+v: LimitsRunning %v, want %v", tc.op, got, tc.want)
		}
	}
}
