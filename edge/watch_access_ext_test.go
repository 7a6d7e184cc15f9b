package edge_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestWatchThroughTheEdgeEndsWhenTheCallerLosesAccess: a member watching an
// environment through the edge is removed (or suspended) by an admin, also
// through the edge; the stream ends with the backend's permission_denied in
// the watcher's protocol within a bound, although the environment lives on
// and the backend re-reads storage only hourly.
func TestWatchThroughTheEdgeEndsWhenTheCallerLosesAccess(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour, WatchPoll: time.Hour, WatchAccessCheck: 100 * time.Millisecond}, nil)
	ctx := ctxT(t)
	owner := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("carol"))
	cases := []struct {
		protocol testkit.Protocol
		watcher  string
		lose     func(orgID, userID string) error
		reason   string
	}{
		{testkit.GRPC, "free-watcher-grpc", func(orgID, userID string) error {
			_, err := owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: orgID, UserId: userID}))
			return err
		}, "ACCESS_REVOKED"},
		{testkit.ConnectJSON, "free-watcher-connect", func(orgID, userID string) error {
			_, err := owner.Org.UpdateMember(ctx, req(&svcv1.UpdateMemberRequest{OrganizationId: orgID, UserId: userID, Status: proto.String("suspended")}))
			return err
		}, "MEMBER_SUSPENDED"},
		{testkit.GRPCWeb, "free-watcher-grpc-web", func(orgID, userID string) error {
			_, err := owner.Org.RemoveMember(ctx, req(&svcv1.RemoveMemberRequest{OrganizationId: orgID, UserId: userID}))
			return err
		}, "ACCESS_REVOKED"},
	}
	for _, c := range cases {
		t.Run(string(c.protocol), func(t *testing.T) {
			org, err := owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "watch-" + string(c.protocol), BillingEmail: "b@acme.example"}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := owner.Org.InviteMember(ctx, req(&svcv1.InviteMemberRequest{OrganizationId: org.Msg.Id, Email: c.watcher + "@example.com", Role: "member"})); err != nil {
				t.Fatal(err)
			}
			prj, err := owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
			if err != nil {
				t.Fatal(err)
			}
			env, err := owner.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
			if err != nil {
				t.Fatal(err)
			}
			watcher := testkit.NewClients(s.edge.URL, c.protocol, token(c.watcher))
			stream, err := watcher.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().Status != "PROVISIONING" {
				t.Fatalf("first message %v, %v", stream.Msg(), stream.Err())
			}
			next := make(chan bool, 1)
			go func() { next <- stream.Receive() }()
			if err := c.lose(org.Msg.Id, devissuer.UserSubject(devissuer.DefaultRealm, c.watcher)); err != nil {
				t.Fatal(err)
			}
			const bound = 10 * time.Second
			select {
			case got := <-next:
				if got {
					t.Fatalf("unexpected message %v", stream.Msg())
				}
				wantError(t, stream.Err(), connect.CodePermissionDenied, c.reason, "svc.v1.EnvironmentService")
			case <-time.After(bound):
				t.Fatalf("the stream is still open %v after the watcher lost access", bound)
			}
		})
	}
}
