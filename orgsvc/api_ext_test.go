package orgsvc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

const (
	orgDomain = "svc.v1.OrganizationService"
	envDomain = "svc.v1.EnvironmentService"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func req[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

// result holds a call's outcome until the test checks it.
type result[T any] struct {
	res *connect.Response[T]
	err error
}

func res[T any](r *connect.Response[T], err error) result[T] { return result[T]{r, err} }

// must fails the test on an error and returns the response message.
func (r result[T]) must(t *testing.T) *T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.res.Msg
}

// wantError asserts the API error a user sees: its code, and exactly one
// ErrorInfo with the reason and domain. It returns the error's details.
func wantError(t *testing.T, err error, code connect.Code, reason, domain string) []any {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v %s", code, reason)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T), want a *connect.Error %v", err, err, code)
	}
	if ce.Code() != code {
		t.Fatalf("got code %v (%v), want %v", ce.Code(), ce.Message(), code)
	}
	var infos []*errdetails.ErrorInfo
	var details []any
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("undecodable detail %s: %v", d.Type(), err)
		}
		details = append(details, v)
		if ei, ok := v.(*errdetails.ErrorInfo); ok {
			infos = append(infos, ei)
		}
	}
	if len(infos) != 1 {
		t.Fatalf("got %d ErrorInfo details, want 1 (error %v)", len(infos), ce)
	}
	if infos[0].Reason != reason || infos[0].Domain != domain {
		t.Fatalf("got ErrorInfo %s/%s, want %s/%s (%v)", infos[0].Domain, infos[0].Reason, domain, reason, ce.Message())
	}
	return details
}

// badFields returns the fields a BadRequest detail names.
func badFields(details []any) []string {
	var fields []string
	for _, d := range details {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				fields = append(fields, v.Field)
			}
		}
	}
	slices.Sort(fields)
	return fields
}

// TestAPIEveryProtocolEveryDatabase runs the whole API, as users call it,
// in every protocol against every storage backend.
func TestAPIEveryProtocolEveryDatabase(t *testing.T) {
	for _, db := range testkit.Databases {
		t.Run(string(db), func(t *testing.T) {
			iss := testkit.StartIssuer(t)
			be := testkit.StartBackend(t, db, iss.URL(), orgsvc.Config{ProvisionDelay: time.Second, WatchPoll: 100 * time.Millisecond})
			for _, p := range testkit.Protocols {
				t.Run(string(p), func(t *testing.T) {
					t.Parallel()
					apiSuite(t, be.URL, iss.URL(), p)
				})
			}
		})
	}
}

func apiSuite(t *testing.T, baseURL, issuerURL string, p testkit.Protocol) {
	ctx := ctxT(t)
	as := func(who string) testkit.Clients {
		return testkit.NewClients(baseURL, p, testkit.Token(t, issuerURL, who))
	}
	// Every protocol gets its own people, so that counts are exact while the
	// protocols run in parallel.
	ownerName, memberName, outsiderName := "pro-owner-"+string(p), "free-member-"+string(p), "free-outsider-"+string(p)
	owner, member, outsider := as(ownerName), as(memberName), as(outsiderName)
	admin, viewer, envManager := as("svc-admin"), as("svc-viewer"), as("svc-env-manager")
	orgName := "acme-" + string(p)

	var org *svcv1.Organization
	t.Run("CreateOrganizationMakesCallerFirstAdmin", func(t *testing.T) {
		org = res(owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: orgName, DisplayName: "Acme Inc.", BillingEmail: "billing@acme.example"}))).must(t)
		if org.Id == "" || org.Name != orgName || org.DisplayName != "Acme Inc." || org.BillingEmail != "billing@acme.example" || org.Plan != "pro" || org.MemberCount != 1 || org.ProjectCount != 0 || org.CreatedAt == nil {
			t.Fatalf("got %v", org)
		}
		got := res(owner.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))).must(t)
		if !proto.Equal(got, org) {
			t.Fatalf("GetOrganization = %v, want %v", got, org)
		}
	})
	if org == nil {
		t.FailNow()
	}
	t.Run("DuplicateNameAlreadyExists", func(t *testing.T) {
		_, err := outsider.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: orgName, BillingEmail: "x@y.example"}))
		wantError(t, err, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN", orgDomain)
	})
	t.Run("BadFieldsAreNamedInBadRequest", func(t *testing.T) {
		_, err := owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "-Bad_Name", DisplayName: string(make([]byte, 201)), BillingEmail: "not-an-address"}))
		d := wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got, want := badFields(d), []string{"billing_email", "display_name", "name"}; !slices.Equal(got, want) {
			t.Fatalf("bad fields %v, want %v", got, want)
		}
		_, err = owner.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{PageSize: 1001}))
		d = wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got := badFields(d); !slices.Equal(got, []string{"page_size"}) {
			t.Fatalf("bad fields %v", got)
		}
		_, err = owner.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{PageToken: "!!"}))
		wantError(t, err, connect.CodeInvalidArgument, "INVALID_PAGE_TOKEN", orgDomain)
	})
	t.Run("OutsiderSeesNotFound", func(t *testing.T) {
		_, err := outsider.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)
		_, err = owner.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "org_missing"}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)
		list := res(outsider.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t)
		if len(list.Organizations) != 0 {
			t.Fatalf("outsider lists %v", list.Organizations)
		}
	})
	t.Run("UpdateOrganizationChangesOnlySetFields", func(t *testing.T) {
		got := res(owner.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: org.Id, DisplayName: proto.String("Acme Corp")}))).must(t)
		if got.DisplayName != "Acme Corp" || got.BillingEmail != org.BillingEmail {
			t.Fatalf("got %v", got)
		}
		_, err := owner.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: org.Id, BillingEmail: proto.String("nope")}))
		d := wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got := badFields(d); !slices.Equal(got, []string{"billing_email"}) {
			t.Fatalf("bad fields %v", got)
		}
	})

	t.Run("InvitationBecomesMembershipOnNextCall", func(t *testing.T) {
		_, err := owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: memberName + "@example.com", Role: "owner"}))
		d := wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got := badFields(d); !slices.Equal(got, []string{"role"}) {
			t.Fatalf("bad fields %v", got)
		}
		_, err = outsider.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: "x@example.com", Role: "member"}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)

		inv := res(owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: memberName + "@example.com", Role: "member"}))).must(t)
		if inv.Id == "" || inv.Status != "pending" || inv.Role != "member" || inv.ExpiresAt.AsTime().Sub(inv.InvitedAt.AsTime()) != 7*24*time.Hour {
			t.Fatalf("got %v", inv)
		}
		_, err = owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: ownerName + "@example.com", Role: "member"}))
		wantError(t, err, connect.CodeAlreadyExists, "ALREADY_MEMBER", orgDomain)

		ms := res(owner.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id, IncludeInvitations: true}))).must(t)
		if len(ms.Members) != 1 || ms.Members[0].Role != "admin" || ms.Members[0].Email != ownerName+"@example.com" || ms.Members[0].Status != "active" {
			t.Fatalf("members %v", ms.Members)
		}
		if len(ms.Invitations) != 1 || ms.Invitations[0].Email != memberName+"@example.com" || ms.Invitations[0].InvitedAt == nil {
			t.Fatalf("invitations %v", ms.Invitations)
		}
		// The invitee's next call, whatever it is, admits them.
		list := res(member.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t)
		if len(list.Organizations) != 1 || list.Organizations[0].Id != org.Id || list.Organizations[0].Role != "member" || list.Organizations[0].MemberCount != 2 {
			t.Fatalf("member lists %v", list.Organizations)
		}
		ms = res(owner.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id, IncludeInvitations: true}))).must(t)
		if len(ms.Members) != 2 || len(ms.Invitations) != 0 {
			t.Fatalf("after acceptance: members %v invitations %v", ms.Members, ms.Invitations)
		}
	})
	t.Run("MemberNeedsAdminToChangeOrganization", func(t *testing.T) {
		_, err := member.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: org.Id, DisplayName: proto.String("x")}))
		wantError(t, err, connect.CodePermissionDenied, "ADMIN_ROLE_REQUIRED", orgDomain)
		_, err = member.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: "x@example.com", Role: "member"}))
		wantError(t, err, connect.CodePermissionDenied, "ADMIN_ROLE_REQUIRED", orgDomain)
	})

	var prj *svcv1.Project
	t.Run("MemberCreatesAndUpdatesProjects", func(t *testing.T) {
		prj = res(member.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "web", Description: "the site"}))).must(t)
		if prj.Id == "" || prj.OrganizationId != org.Id || prj.Name != "web" || prj.Description != "the site" || prj.CreatedAt == nil {
			t.Fatalf("got %v", prj)
		}
		_, err := owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "web"}))
		wantError(t, err, connect.CodeAlreadyExists, "PROJECT_NAME_TAKEN", orgDomain)
		_, err = owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "x", Description: string(make([]rune, 2001))}))
		wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		_, err = outsider.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: prj.Id}))
		wantError(t, err, connect.CodeNotFound, "PROJECT_NOT_FOUND", orgDomain)
		_, err = owner.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: "prj_missing"}))
		wantError(t, err, connect.CodeNotFound, "PROJECT_NOT_FOUND", orgDomain)

		prj = res(member.Org.UpdateProject(ctx, req(&svcv1.UpdateProjectRequest{ProjectId: prj.Id, Name: proto.String("site")}))).must(t)
		if prj.Name != "site" || prj.Description != "the site" {
			t.Fatalf("got %v", prj)
		}
		res(owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "api"}))).must(t)
		page1 := res(owner.Org.ListProjects(ctx, req(&svcv1.ListProjectsRequest{OrganizationId: org.Id, PageSize: 1}))).must(t)
		if len(page1.Projects) != 1 || page1.Projects[0].Name != "site" || page1.NextPageToken == "" {
			t.Fatalf("page 1: %v", page1)
		}
		page2 := res(owner.Org.ListProjects(ctx, req(&svcv1.ListProjectsRequest{OrganizationId: org.Id, PageSize: 1, PageToken: page1.NextPageToken}))).must(t)
		if len(page2.Projects) != 1 || page2.Projects[0].Name != "api" || page2.NextPageToken != "" {
			t.Fatalf("page 2: %v", page2)
		}
		got := res(owner.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))).must(t)
		if got.ProjectCount != 2 {
			t.Fatalf("project_count %d, want 2", got.ProjectCount)
		}
	})
	if prj == nil {
		t.FailNow()
	}

	var env *svcv1.Environment
	t.Run("EnvironmentsKeepProjectCountsExact", func(t *testing.T) {
		_, err := member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "dev", BlueprintId: "no-such-blueprint", ProjectId: prj.Id}))
		wantError(t, err, connect.CodeNotFound, "BLUEPRINT_NOT_FOUND", envDomain)
		_, err = member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "dev", BlueprintId: "go-api", ProjectId: "prj_missing"}))
		wantError(t, err, connect.CodeNotFound, "PROJECT_NOT_FOUND", envDomain)

		env = res(member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "dev", BlueprintId: "go-api", ProjectId: prj.Id}))).must(t).Environment
		if env.Id == "" || env.Status != "PROVISIONING" || env.Name != "dev" || env.ProjectId != prj.Id || env.BlueprintId != "go-api" || env.CreatedAt == nil {
			t.Fatalf("got %v", env)
		}
		_, err = member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "dev", BlueprintId: "go-api", ProjectId: prj.Id}))
		wantError(t, err, connect.CodeAlreadyExists, "ENVIRONMENT_NAME_TAKEN", envDomain)
		res(envManager.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "dev2", BlueprintId: "go-api", ProjectId: prj.Id}))).must(t)
		res(member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "db", BlueprintId: "postgres-16", ProjectId: prj.Id}))).must(t)
		got := res(member.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: prj.Id}))).must(t)
		if got.EnvironmentCount != 3 || got.BlueprintCount != 2 {
			t.Fatalf("counts %d environments, %d blueprints; want 3, 2", got.EnvironmentCount, got.BlueprintCount)
		}
		list := res(member.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{ProjectId: prj.Id}))).must(t)
		if len(list.Environments) != 3 {
			t.Fatalf("listed %d environments", len(list.Environments))
		}
		if got := res(outsider.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{}))).must(t); len(got.Environments) != 0 {
			t.Fatalf("outsider lists %v", got.Environments)
		}
		_, err = outsider.Env.GetEnvironment(ctx, req(&svcv1.GetEnvironmentRequest{EnvironmentId: env.Id}))
		wantError(t, err, connect.CodeNotFound, "ENVIRONMENT_NOT_FOUND", envDomain)
		if got := res(viewer.Env.GetEnvironment(ctx, req(&svcv1.GetEnvironmentRequest{EnvironmentId: env.Id}))).must(t); got.Environment.Id != env.Id {
			t.Fatalf("viewer got %v", got)
		}
	})
	if env == nil {
		t.FailNow()
	}
	t.Run("WatchStreamsProvisioningRunningDeleted", func(t *testing.T) {
		if !p.Streams() {
			_, err := member.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Id}))
			if !errors.Is(err, testkit.ErrNoStreaming) {
				t.Fatalf("plain JSON client streamed: %v", err)
			}
			return
		}
		stream, err := member.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Id}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		var seen []string
		for stream.Receive() {
			msg := stream.Msg()
			if msg.Status != msg.Environment.Status || msg.Environment.Id != env.Id {
				t.Fatalf("message %v", msg)
			}
			seen = append(seen, msg.Status)
			if msg.Status == "RUNNING" {
				del := res(member.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Id}))).must(t)
				if del.Environment.Status != "DELETED" || del.Environment.DeletedAt == nil {
					t.Fatalf("delete returned %v", del.Environment)
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		seen = slices.Compact(seen)
		if !slices.Equal(seen, []string{"PROVISIONING", "RUNNING", "DELETED"}) && !slices.Equal(seen, []string{"RUNNING", "DELETED"}) {
			t.Fatalf("statuses %v", seen)
		}
	})
	t.Run("DeletedEnvironmentIsGoneAndFreesCounts", func(t *testing.T) {
		if p.Streams() { // the watch above deleted it
			_, err := member.Env.GetEnvironment(ctx, req(&svcv1.GetEnvironmentRequest{EnvironmentId: env.Id}))
			wantError(t, err, connect.CodeNotFound, "ENVIRONMENT_NOT_FOUND", envDomain)
		} else {
			res(member.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Id}))).must(t)
		}
		_, err := member.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Id}))
		wantError(t, err, connect.CodeNotFound, "ENVIRONMENT_NOT_FOUND", envDomain)
		got := res(member.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: prj.Id}))).must(t)
		if got.EnvironmentCount != 2 || got.BlueprintCount != 2 {
			t.Fatalf("counts %d environments, %d blueprints; want 2, 2", got.EnvironmentCount, got.BlueprintCount)
		}
	})

	t.Run("ServiceAccountsActByRole", func(t *testing.T) {
		_, err := viewer.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "viewer-" + string(p), BillingEmail: "a@b.example"}))
		wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", orgDomain)
		_, err = viewer.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "v", BlueprintId: "go-api", ProjectId: prj.Id}))
		wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", envDomain)
		_, err = envManager.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "nope"}))
		wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", orgDomain)
		if got := res(viewer.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))).must(t); got.Id != org.Id {
			t.Fatalf("viewer got %v", got)
		}
		all := res(admin.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{PageSize: 1000}))).must(t)
		if !slices.ContainsFunc(all.Organizations, func(o *svcv1.OrganizationSummary) bool { return o.Id == org.Id && o.Role == "" }) {
			t.Fatalf("svc-admin does not list %s", org.Id)
		}
		saOrg := res(admin.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "robots-" + string(p), BillingEmail: "ops@robots.example"}))).must(t)
		if saOrg.MemberCount != 0 || saOrg.Plan != "free" {
			t.Fatalf("service-account organization %v", saOrg)
		}
		res(admin.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: saOrg.Id}))).must(t)
	})

	t.Run("LastAdminCanBeNeitherDemotedNorRemoved", func(t *testing.T) {
		ms := res(owner.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id}))).must(t)
		var ownerID, memberID string
		for _, m := range ms.Members {
			if m.Role == "admin" {
				ownerID = m.UserId
			} else {
				memberID = m.UserId
			}
		}
		_, err := owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: ownerID, Role: "member"}))
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		_, err = owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: org.Id, UserId: ownerID}))
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		_, err = owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: "nobody", Role: "member"}))
		wantError(t, err, connect.CodeNotFound, "MEMBER_NOT_FOUND", orgDomain)
		_, err = member.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: memberID, Role: "admin"}))
		wantError(t, err, connect.CodePermissionDenied, "ADMIN_ROLE_REQUIRED", orgDomain)

		promoted := res(owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: memberID, Role: "admin"}))).must(t)
		if promoted.Role != "admin" || promoted.UserId != memberID {
			t.Fatalf("got %v", promoted)
		}
		// Two admins now: the first may step down, then the second is last.
		res(owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: ownerID, Role: "member"}))).must(t)
		_, err = member.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: org.Id, UserId: memberID}))
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		// A member may leave on their own.
		res(owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: org.Id, UserId: ownerID}))).must(t)
		_, err = owner.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)
		if got := res(member.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))).must(t); got.MemberCount != 1 {
			t.Fatalf("member_count %d, want 1", got.MemberCount)
		}
	})

	t.Run("DeleteRefusedWhileChildrenExistUnlessForced", func(t *testing.T) {
		remaining := member // the admin now
		_, err := remaining.Org.DeleteProject(ctx, req(&svcv1.DeleteProjectRequest{ProjectId: prj.Id}))
		wantError(t, err, connect.CodeFailedPrecondition, "PROJECT_HAS_ENVIRONMENTS", orgDomain)
		_, err = remaining.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodeFailedPrecondition, "ORGANIZATION_HAS_PROJECTS", orgDomain)
		res(remaining.Org.DeleteProject(ctx, req(&svcv1.DeleteProjectRequest{ProjectId: prj.Id, Force: true}))).must(t)
		_, err = remaining.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: prj.Id}))
		wantError(t, err, connect.CodeNotFound, "PROJECT_NOT_FOUND", orgDomain)
		res(remaining.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: org.Id, Force: true}))).must(t)
		_, err = remaining.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)
		_, err = remaining.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", orgDomain)
	})

	t.Run("CatalogSearchAndBlueprintValidation", func(t *testing.T) {
		found := res(outsider.Blueprint.SearchCatalog(ctx, req(&svcv1.SearchCatalogRequest{Query: "postgres"}))).must(t)
		if !slices.ContainsFunc(found.Blueprints, func(b *svcv1.Blueprint) bool { return b.Id == "postgres-16" }) ||
			slices.ContainsFunc(found.Blueprints, func(b *svcv1.Blueprint) bool { return b.Id == "redis-7" }) {
			t.Fatalf("search: %v", found.Blueprints)
		}
		all := res(outsider.Blueprint.SearchCatalog(ctx, req(&svcv1.SearchCatalogRequest{PageSize: 3}))).must(t)
		if len(all.Blueprints) != 3 || all.NextPageToken == "" {
			t.Fatalf("page: %v", all)
		}
		ok := res(outsider.Blueprint.ValidateBlueprint(ctx, req(&svcv1.ValidateBlueprintRequest{Content: "name: shop\nservices:\n  web:\n    image: nginx:1.27\n"}))).must(t)
		if !ok.Valid || len(ok.Violations) != 0 {
			t.Fatalf("valid blueprint: %v", ok)
		}
		bad := res(outsider.Blueprint.ValidateBlueprint(ctx, req(&svcv1.ValidateBlueprintRequest{Content: `{"name":"shop","services":{"web":{"ports":[70000]}}}`}))).must(t)
		if bad.Valid || len(bad.Violations) == 0 {
			t.Fatalf("invalid blueprint: %v", bad)
		}
		_, err := viewer.Blueprint.ValidateBlueprint(ctx, req(&svcv1.ValidateBlueprintRequest{Content: "name: x"}))
		wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", "svc.v1.BlueprintService")
	})
}

// TestUnauthenticatedCallersAreToldWhy covers the bearer token failures in
// every protocol.
func TestUnauthenticatedCallersAreToldWhy(t *testing.T) {
	iss := testkit.StartIssuer(t)
	other := testkit.StartIssuer(t) // a different signing key, a different issuer
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	claims, err := iss.Issuer.ClaimsFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	claims["iat"], claims["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-10*time.Minute).Unix()
	expired, err := iss.Issuer.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issuer.TokenFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, token, reason string
	}{
		{"NoToken", "", "TOKEN_MISSING"},
		{"NotAJWT", "not-a-jwt", "TOKEN_INVALID"},
		{"Expired", expired, "TOKEN_EXPIRED"},
		{"OtherIssuer", foreign, "TOKEN_INVALID"},
	}
	for _, p := range testkit.Protocols {
		for _, c := range cases {
			t.Run(string(p)+"/"+c.name, func(t *testing.T) {
				cl := testkit.NewClients(be.URL, p, c.token)
				_, err := cl.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
				wantError(t, err, connect.CodeUnauthenticated, c.reason, orgDomain)
				var ce *connect.Error
				if errors.As(err, &ce) && p == testkit.HTTPJSON && ce.Meta().Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
					t.Fatalf("WWW-Authenticate %q", ce.Meta().Get("WWW-Authenticate"))
				}
			})
		}
	}
}

// TestConcurrentCreateWithSameNameExactlyOneWins races two callers for one
// organization name, several times, on every database.
func TestConcurrentCreateWithSameNameExactlyOneWins(t *testing.T) {
	for _, db := range testkit.Databases {
		t.Run(string(db), func(t *testing.T) {
			iss := testkit.StartIssuer(t)
			be := testkit.StartBackend(t, db, iss.URL(), orgsvc.Config{})
			a := testkit.NewClients(be.URL, testkit.GRPC, testkit.Token(t, iss.URL(), "alice"))
			b := testkit.NewClients(be.URL, testkit.ConnectJSON, testkit.Token(t, iss.URL(), "bob"))
			ctx := ctxT(t)
			for round := range 10 {
				name := fmt.Sprintf("race-%d", round)
				start := make(chan struct{})
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, c := range []testkit.Clients{a, b} {
					wg.Go(func() {
						<-start
						_, errs[i] = c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "b@x.example"}))
					})
				}
				close(start)
				wg.Wait()
				won := 0
				for _, err := range errs {
					if err == nil {
						won++
						continue
					}
					wantError(t, err, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN", orgDomain)
				}
				if won != 1 {
					t.Fatalf("round %d: %d callers succeeded, want exactly 1", round, won)
				}
			}
		})
	}
}

// TestInvitationExpiresAfterConfiguredPeriod moves the backend's clock past
// the invitation's expiry: the invitee's call then admits nobody.
func TestInvitationExpiresAfterConfiguredPeriod(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{Now: clock, InvitationTTL: 48 * time.Hour})
	ctx := ctxT(t)
	alice := testkit.NewClients(be.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "alice"))
	org := res(alice.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "expiry", BillingEmail: "a@x.example"}))).must(t)
	inv := res(alice.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: "bob@example.com", Role: "admin"}))).must(t)
	if got := inv.ExpiresAt.AsTime().Sub(inv.InvitedAt.AsTime()); got != 48*time.Hour {
		t.Fatalf("invitation lasts %v, want 48h", got)
	}
	mu.Lock()
	now = now.Add(48*time.Hour + time.Second)
	mu.Unlock()
	bob := testkit.NewClients(be.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "bob"))
	if list := res(bob.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t); len(list.Organizations) != 0 {
		t.Fatalf("expired invitation admitted bob: %v", list.Organizations)
	}
	ms := res(alice.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id, IncludeInvitations: true}))).must(t)
	if len(ms.Invitations) != 0 || len(ms.Members) != 1 {
		t.Fatalf("after expiry: %v", ms)
	}
}
