package orgsvc_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestSuspendedMembersHaveNoAccessAndDoNotCountAsAdmins suspends members
// through UpdateMember, in every protocol against every storage backend, and
// checks what the suspended see and that the last active admin stays.
func TestSuspendedMembersHaveNoAccessAndDoNotCountAsAdmins(t *testing.T) {
	for _, db := range testkit.Databases {
		t.Run(string(db), func(t *testing.T) {
			iss := testkit.StartIssuer(t)
			be := testkit.StartBackend(t, db, iss.URL(), orgsvc.Config{})
			for _, p := range testkit.Protocols {
				t.Run(string(p), func(t *testing.T) {
					t.Parallel()
					suspensionSuite(t, be.URL, iss.URL(), p)
				})
			}
		})
	}
}

func suspensionSuite(t *testing.T, baseURL, issuerURL string, p testkit.Protocol) {
	ctx := ctxT(t)
	as := func(who string) testkit.Clients {
		return testkit.NewClients(baseURL, p, testkit.Token(t, issuerURL, who))
	}
	ownerName, adminName, memberName := "pro-owner-s-"+string(p), "pro-admin-s-"+string(p), "free-member-s-"+string(p)
	owner, admin, member := as(ownerName), as(adminName), as(memberName)
	adminID := devissuer.UserSubject(devissuer.DefaultRealm, adminName)
	memberID := devissuer.UserSubject(devissuer.DefaultRealm, memberName)
	ownerID := devissuer.UserSubject(devissuer.DefaultRealm, ownerName)

	org := res(owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "suspensions-" + string(p), BillingEmail: "b@acme.example"}))).must(t)
	for _, inv := range []struct{ name, role string }{{adminName, "admin"}, {memberName, "member"}} {
		res(owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: inv.name + "@example.com", Role: inv.role}))).must(t)
	}
	res(admin.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t) // accepts
	res(member.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t)
	prj := res(owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}))).must(t)
	env := res(owner.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Id}))).must(t).Environment

	update := func(c testkit.Clients, user string, role string, status *string) (*svcv1.Member, error) {
		r, err := c.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: org.Id, UserId: user, Role: role, Status: status}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	suspended, active := proto.String("suspended"), proto.String("active")

	t.Run("BadStatusIsInvalid", func(t *testing.T) {
		_, err := update(owner, memberID, "", proto.String("banned"))
		d := wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got := badFields(d); !slices.Equal(got, []string{"status"}) {
			t.Fatalf("bad fields %v", got)
		}
		_, err = update(owner, memberID, "", nil) // nothing to change
		d = wantError(t, err, connect.CodeInvalidArgument, "VALIDATION_FAILED", orgDomain)
		if got := badFields(d); !slices.Equal(got, []string{"role"}) {
			t.Fatalf("bad fields %v", got)
		}
	})
	t.Run("OnlyAnAdminSuspends", func(t *testing.T) {
		_, err := update(member, adminID, "", suspended)
		wantError(t, err, connect.CodePermissionDenied, "ADMIN_ROLE_REQUIRED", orgDomain)
	})

	t.Run("SuspendedMemberIsRefusedEverywhere", func(t *testing.T) {
		m, err := update(owner, memberID, "", suspended)
		if err != nil || m.Status != "suspended" || m.Role != "member" || m.UserId != memberID {
			t.Fatalf("suspending: %v, %v", m, err)
		}
		refused := map[string]error{}
		_, refused["GetOrganization"] = member.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))
		_, refused["ListProjects"] = member.Org.ListProjects(ctx, req(&svcv1.ListProjectsRequest{OrganizationId: org.Id}))
		_, refused["GetProject"] = member.Org.GetProject(ctx, req(&svcv1.GetProjectRequest{ProjectId: prj.Id}))
		_, refused["CreateProject"] = member.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "q"}))
		_, refused["UpdateProject"] = member.Org.UpdateProject(ctx, req(&svcv1.UpdateProjectRequest{ProjectId: prj.Id, Name: proto.String("r")}))
		_, refused["ListMembers"] = member.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id, IncludeInvitations: true}))
		_, refused["RemoveMember(self)"] = member.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: org.Id, UserId: memberID}))
		_, refused["GetEnvironment"] = member.Env.GetEnvironment(ctx, req(&svcv1.GetEnvironmentRequest{EnvironmentId: env.Id}))
		_, refused["CreateEnvironment"] = member.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "x", BlueprintId: "go-api", ProjectId: prj.Id}))
		_, refused["DeleteEnvironment"] = member.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Id}))
		for op, err := range refused {
			t.Run(op, func(t *testing.T) {
				domain := orgDomain
				if op == "GetEnvironment" || op == "CreateEnvironment" || op == "DeleteEnvironment" {
					domain = envDomain
				}
				wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", domain)
			})
		}
		if p.Streams() {
			stream, err := member.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Id}))
			if err == nil {
				for stream.Receive() {
					t.Errorf("suspended member watched %v", stream.Msg())
				}
				err = stream.Err()
				stream.Close()
			}
			wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", envDomain)
		}
		// Lists leave the organization out, as for a stranger.
		orgs := res(member.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))).must(t)
		if len(orgs.Organizations) != 0 {
			t.Errorf("suspended member lists organizations %v", orgs.Organizations)
		}
		envs := res(member.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{}))).must(t)
		if len(envs.Environments) != 0 {
			t.Errorf("suspended member lists environments %v", envs.Environments)
		}
		// The organization still shows the membership, suspended.
		ms := res(owner.Org.ListMembers(ctx, req(&svcv1.ListMembersRequest{OrganizationId: org.Id}))).must(t)
		i := slices.IndexFunc(ms.Members, func(m *svcv1.Member) bool { return m.UserId == memberID })
		if i < 0 || ms.Members[i].Status != "suspended" {
			t.Errorf("members %v: want %s suspended", ms.Members, memberID)
		}
		// Inviting the suspended member's address does not lift the suspension.
		_, err = owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: memberName + "@example.com", Role: "admin"}))
		wantError(t, err, connect.CodeAlreadyExists, "ALREADY_MEMBER", orgDomain)
	})

	t.Run("SuspendedAdminHasNoAdminRights", func(t *testing.T) {
		if _, err := update(owner, adminID, "", suspended); err != nil {
			t.Fatalf("suspending one of two admins: %v", err)
		}
		_, err := admin.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: org.Id, DisplayName: proto.String("mine")}))
		wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", orgDomain)
		_, err = update(admin, adminID, "", active) // no reinstating oneself
		wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", orgDomain)
		_, err = admin.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: "x@example.com", Role: "admin"}))
		wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", orgDomain)
	})

	t.Run("LastActiveAdminCanNeitherBeSuspendedDemotedNorRemoved", func(t *testing.T) {
		// The suspended admin does not count: the owner is the last active one.
		_, err := update(owner, ownerID, "", suspended)
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		_, err = update(owner, ownerID, "member", nil)
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		_, err = owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: org.Id, UserId: ownerID}))
		wantError(t, err, connect.CodeFailedPrecondition, "LAST_ADMIN", orgDomain)
		// Still in charge.
		res(owner.Org.UpdateOrganization(ctx, req(&svcv1.UpdateOrganizationRequest{OrganizationId: org.Id, DisplayName: proto.String("still")}))).must(t)
	})

	t.Run("ReinstatedMembersHaveAccessAgain", func(t *testing.T) {
		if m, err := update(owner, memberID, "", active); err != nil || m.Status != "active" {
			t.Fatalf("reinstating: %v, %v", m, err)
		}
		res(member.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))).must(t)
		if envs := res(member.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{}))).must(t); len(envs.Environments) != 1 {
			t.Errorf("reinstated member lists environments %v", envs.Environments)
		}
		if _, err := update(owner, adminID, "", active); err != nil {
			t.Fatal(err)
		}
		// Two active admins again: the owner may now step down.
		if m, err := update(owner, ownerID, "", suspended); err != nil || m.Status != "suspended" {
			t.Fatalf("suspending oneself beside another active admin: %v, %v", m, err)
		}
		_, err := owner.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Id}))
		wantError(t, err, connect.CodePermissionDenied, "MEMBER_SUSPENDED", orgDomain)
	})
}

// TestWatchEndsWhenTheCallerLosesAccess opens WatchEnvironment streams over
// Connect, gRPC and gRPC-Web, straight to the backend, and takes the
// caller's access away in each way: the stream must end within a few access
// checks, although the environment lives on and storage polling is an hour
// apart.
func TestWatchEndsWhenTheCallerLosesAccess(t *testing.T) {
	iss := testkit.StartIssuer(t)
	st := testkit.OpenStore(t, testkit.SQLite)
	cfg := orgsvc.Config{Store: st, ProvisionDelay: time.Hour, WatchPoll: time.Hour, WatchAccessCheck: 100 * time.Millisecond}
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), cfg)
	// A second replica on the same storage, for changes this process does
	// not see happen.
	other := testkit.StartBackend(t, testkit.SQLite, iss.URL(), cfg)
	ctx := ctxT(t)

	cases := []struct {
		name     string
		lose     func(t *testing.T, owner testkit.Clients, orgID, watcher string)
		reason   string // "" for a last DELETED message and a clean end
		wantCode connect.Code
	}{
		{"Removed", func(t *testing.T, owner testkit.Clients, orgID, watcher string) {
			res(owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: orgID, UserId: subject(watcher)}))).must(t)
		}, "ACCESS_REVOKED", connect.CodePermissionDenied},
		{"Suspended", func(t *testing.T, owner testkit.Clients, orgID, watcher string) {
			res(owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: orgID, UserId: subject(watcher), Status: proto.String("suspended")}))).must(t)
		}, "MEMBER_SUSPENDED", connect.CodePermissionDenied},
		{"LeftOnTheirOwn", func(t *testing.T, _ testkit.Clients, orgID, watcher string) {
			self := testkit.NewClients(other.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), watcher))
			res(self.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: orgID, UserId: subject(watcher)}))).must(t)
		}, "ACCESS_REVOKED", connect.CodePermissionDenied},
		{"OrganizationDeleted", func(t *testing.T, owner testkit.Clients, orgID, _ string) {
			res(owner.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: orgID, Force: true}))).must(t)
		}, "", 0},
	}
	protocols := []testkit.Protocol{testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := protocols[i%len(protocols)]
			watcherName := "free-watcher-" + strings.ToLower(c.name)
			// The change is made through the other replica: this one
			// learns of it only by checking again.
			owner := testkit.NewClients(other.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "pro-watch-owner"))
			org := res(owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "watch-" + strings.ToLower(c.name), BillingEmail: "b@acme.example"}))).must(t)
			res(owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Id, Email: watcherName + "@example.com", Role: "member"}))).must(t)
			prj := res(owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}))).must(t)
			env := res(owner.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Id}))).must(t).Environment

			watcher := testkit.NewClients(be.URL, p, testkit.Token(t, iss.URL(), watcherName))
			stream, err := watcher.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().Status != "PROVISIONING" {
				t.Fatalf("first message %v, %v", stream.Msg(), stream.Err())
			}
			// Several checks pass while the watcher is a member: the stream
			// stays open. (A message would be a failure; so would the end.)
			alive := make(chan bool, 1)
			go func() { alive <- stream.Receive() }()
			select {
			case got := <-alive:
				t.Fatalf("stream moved while access held: message %v, %v, err %v", got, stream.Msg(), stream.Err())
			case <-time.After(500 * time.Millisecond):
			}

			lost := time.Now()
			c.lose(t, owner, org.Id, watcherName)
			// Bounded: well within the test's deadline, though polling is
			// an hour apart and the environment still PROVISIONING.
			const bound = 10 * time.Second
			select {
			case got := <-alive:
				if c.reason == "" {
					if !got || stream.Msg().Status != "DELETED" {
						t.Fatalf("want a last DELETED message, got %v %v (err %v)", got, stream.Msg(), stream.Err())
					}
					if stream.Receive() || stream.Err() != nil {
						t.Fatalf("after DELETED: %v", stream.Err())
					}
				} else {
					if got {
						t.Fatalf("unexpected message %v", stream.Msg())
					}
					wantError(t, stream.Err(), c.wantCode, c.reason, envDomain)
				}
			case <-time.After(bound):
				t.Fatalf("the stream is still open %v after the caller lost access", bound)
			}
			t.Logf("%s over %s: stream ended %v after the change", c.name, p, time.Since(lost).Round(time.Millisecond))
		})
	}
}

// subject is the user id (sub) of a development user.
func subject(username string) string { return devissuer.UserSubject(devissuer.DefaultRealm, username) }
