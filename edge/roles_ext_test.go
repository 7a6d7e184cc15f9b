package edge_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// Callers of the role table: the three service-account roles of the
// specification's table, and a person (a token without svc-* roles).
const (
	svcAdmin   = "svc-admin"
	envManager = "svc-env-manager"
	viewer     = "svc-viewer"
	person     = "person"
)

// roleFixture is what one call of the role table acts on, made fresh for
// each call, straight at the backend, by the person who owns it.
type roleFixture struct {
	orgID, projectID, envID string
	memberID                string // a second member, for UpdateMember and RemoveMember
	n                       int    // unique per fixture, for names
}

// y and n mark a role table cell: allowed or refused with MISSING_ROLE.
const (
	y = true
	n = false
)

// roleTable is the specification's role table (svc-admin: full access;
// svc-env-manager: create and manage environments, and read; svc-viewer:
// read-only) and the design's rule for people (never refused by the edge:
// the backend decides by membership), written out for every procedure of
// the operation table. It is deliberately literal, not derived from method
// names: a changed row of the shipped operation table makes a cell fail.
var roleTable = []struct {
	procedure                           string
	admin, envManager, viewer, isPerson bool
	call                                func(ctx context.Context, c testkit.Clients, f roleFixture) error
}{
	{"/svc.v1.BlueprintService/SearchCatalog", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Blueprint.SearchCatalog(ctx, req(&svcv1.SearchCatalogRequest{Query: "go"}))
		return err
	}},
	{"/svc.v1.BlueprintService/ValidateBlueprint", y, y, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Blueprint.ValidateBlueprint(ctx, req(&svcv1.ValidateBlueprintRequest{Content: "name: s\nservices:\n  web:\n    image: nginx:1.27\n"}))
		return err
	}},
	{"/svc.v1.EnvironmentService/CreateEnvironment", y, y, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "made", BlueprintId: "go-api", ProjectId: f.projectID}))
		return err
	}},
	{"/svc.v1.EnvironmentService/DeleteEnvironment", y, y, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: f.envID}))
		return err
	}},
	{"/svc.v1.EnvironmentService/GetEnvironment", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Env.GetEnvironment(ctx, req(&svcv1.GetEnvironmentRequest{EnvironmentId: f.envID}))
		return err
	}},
	{"/svc.v1.EnvironmentService/ListEnvironments", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{ProjectId: f.projectID}))
		return err
	}},
	{"/svc.v1.EnvironmentService/WatchEnvironment", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: f.envID}))
		if err != nil {
			return err
		}
		defer stream.Close()
		if stream.Receive() {
			return nil // the first message: the caller may watch
		}
		if err := stream.Err(); err != nil {
			return err
		}
		return fmt.Errorf("stream ended without a message or an error")
	}},
	{"/svc.v1.OrganizationService/CreateOrganization", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: fmt.Sprintf("made-%d", f.n), BillingEmail: "b@acme.example"}))
		return err
	}},
	{"/svc.v1.OrganizationService/CreateProject", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: f.orgID, Name: "made"}))
		return err
	}},
	{"/svc.v1.OrganizationService/DeleteOrganization", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: f.orgID, Force: true}))
		return err
	}},
	{"/svc.v1.OrganizationService/DeleteProject", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.DeleteProject(ctx, req(&svcv1.DeleteProjectRequest{ProjectId: f.projectID, Force: true}))
		return err
	}},
	{"/svc.v1.OrganizationService/GetOrganization", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: f.orgID}))
		return err
	}},
	{"/svc.v1.OrganizationService/GetProject", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: f.projectID}))
		return err
	}},
	{"/svc.v1.OrganizationService/InviteMember", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: f.orgID, Email: "new@example.com", Role: "member"}))
		return err
	}},
	{"/svc.v1.OrganizationService/ListMembers", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: f.orgID, IncludeInvitations: true}))
		return err
	}},
	{"/svc.v1.OrganizationService/ListOrganizations", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
		return err
	}},
	{"/svc.v1.OrganizationService/ListProjects", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.ListProjects(ctx, req(&svcv1.ListProjectsRequest{OrganizationId: f.orgID}))
		return err
	}},
	{"/svc.v1.OrganizationService/RemoveMember", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: f.orgID, UserId: f.memberID}))
		return err
	}},
	{"/svc.v1.OrganizationService/UpdateMember", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: f.orgID, UserId: f.memberID, Role: "admin"}))
		return err
	}},
	{"/svc.v1.OrganizationService/UpdateOrganization", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: f.orgID, DisplayName: proto.String("renamed")}))
		return err
	}},
	{"/svc.v1.OrganizationService/UpdateProject", y, n, n, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Org.UpdateProject(ctx, req(&svcv1.UpdateProjectRequest{ProjectId: f.projectID, Description: proto.String("changed")}))
		return err
	}},
	{"/svc.v1.UsageService/GetUsage", y, y, y, y, func(ctx context.Context, c testkit.Clients, f roleFixture) error {
		_, err := c.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
		return err
	}},
}

// TestRoleTableEveryProcedureEveryRole calls every procedure of the
// operation table through the edge as each service-account role and as a
// person, with real tokens from the development issuer, on real resources,
// and checks each cell of roleTable: an allowed call succeeds (the backend
// agrees with the edge), a refused one is permission_denied MISSING_ROLE
// from the edge itself, naming the roles that would do.
func TestRoleTableEveryProcedureEveryRole(t *testing.T) {
	t.Parallel()
	var listed []string
	for _, row := range roleTable {
		listed = append(listed, row.procedure)
	}
	var shipped []string
	for _, op := range config.DefaultOperations() {
		shipped = append(shipped, op.Procedure)
	}
	slices.Sort(shipped)
	if !slices.Equal(listed, shipped) {
		t.Fatalf("the role table lists\n%v\nthe operation table has\n%v\n(add the new procedure's row, by the specification's role table)", listed, shipped)
	}
	if got, want := shipped, slices.Sorted(maps.Keys(config.Procedures())); !slices.Equal(got, want) {
		t.Fatalf("the operation table has %v, the API %v", got, want)
	}

	s, token := startStack(t, orgsvc.Config{}, nil)
	const owner, other = "carol", "bob" // the person of the table owns the fixtures
	tokens := map[string]string{svcAdmin: token(svcAdmin), envManager: token(envManager), viewer: token(viewer), person: token(owner)}
	// Fixtures are made at the backend, past the edge, so that only the
	// calls under test count against the edge's limits.
	direct := testkit.NewClients(s.backend.URL, testkit.ConnectProto, tokens[person])
	joiner := testkit.NewClients(s.backend.URL, testkit.ConnectProto, token(other))
	fixtures := 0
	newFixture := func(ctx context.Context, t *testing.T) roleFixture {
		t.Helper()
		fixtures++
		f := roleFixture{n: fixtures, memberID: devissuer.UserSubject(devissuer.DefaultRealm, other)}
		org, err := direct.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: fmt.Sprintf("roles-%d", f.n), BillingEmail: "b@acme.example"}))
		if err != nil {
			t.Fatal(err)
		}
		f.orgID = org.Msg.Id
		if _, err := direct.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: f.orgID, Email: other + "@example.com", Role: "member"})); err != nil {
			t.Fatal(err)
		}
		if _, err := joiner.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil { // accepts
			t.Fatal(err)
		}
		prj, err := direct.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: f.orgID, Name: "p"}))
		if err != nil {
			t.Fatal(err)
		}
		f.projectID = prj.Msg.Id
		env, err := direct.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: f.projectID}))
		if err != nil {
			t.Fatal(err)
		}
		f.envID = env.Msg.Environment.Id
		return f
	}

	refusedFixture := newFixture(ctxT(t), t)
	for _, row := range roleTable {
		cells := []struct {
			caller  string
			allowed bool
		}{{svcAdmin, row.admin}, {envManager, row.envManager}, {viewer, row.viewer}, {person, row.isPerson}}
		var required []string
		for _, c := range cells[:3] {
			if c.allowed {
				required = append(required, c.caller)
			}
		}
		for _, c := range cells {
			t.Run(strings.TrimPrefix(row.procedure, "/svc.v1.")+"/"+c.caller, func(t *testing.T) {
				ctx := ctxT(t) // each cell's own bound: under parallel load the table takes a while
				// A call the edge must refuse never reaches the backend:
				// it names the fixture every refused cell shares. An
				// allowed call acts on a fixture of its own.
				f := refusedFixture
				if c.allowed {
					f = newFixture(ctx, t)
				}
				err := row.call(ctx, testkit.NewClients(s.edge.URL, testkit.ConnectProto, tokens[c.caller]), f)
				if c.allowed {
					if err != nil {
						t.Fatalf("%s may call %s, got %v", c.caller, row.procedure, err)
					}
					return
				}
				ce := wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", "edge")
				if got, want := errorInfo(t, ce).Metadata["required_roles"], strings.Join(required, ","); got != want {
					t.Fatalf("required_roles %q, want %q", got, want)
				}
			})
		}
	}
}
