package policy_test

import (
	"testing"

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
