package orgsvc_test

import (
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestGRPCGoClientsHealthReflectionAndCalls uses the reference gRPC
// implementation, as grpcurl and most gRPC users do.
func TestGRPCGoClientsHealthReflectionAndCalls(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	conn, err := grpc.NewClient(strings.TrimPrefix(be.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := ctxT(t)

	t.Run("HealthServing", func(t *testing.T) {
		for _, svc := range []string{"", "svc.v1.OrganizationService"} {
			res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health %q: %v %v", svc, res, err)
			}
		}
	})
	t.Run("ReflectionListsServices", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		var names []string
		for _, s := range res.GetListServicesResponse().GetService() {
			names = append(names, s.Name)
		}
		for _, want := range []string{"svc.v1.OrganizationService", "svc.v1.EnvironmentService", "svc.v1.BlueprintService"} {
			if !slices.Contains(names, want) {
				t.Fatalf("reflection lists %v, missing %s", names, want)
			}
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Fatalf("after CloseSend: %v", err)
		}
	})
	t.Run("CallAndStatusDetails", func(t *testing.T) {
		md := metadata.Pairs("authorization", "Bearer "+testkit.Token(t, iss.URL(), "carol"))
		cctx := metadata.NewOutgoingContext(ctx, md)
		org := new(svcv1.Organization)
		if err := conn.Invoke(cctx, "/svc.v1.OrganizationService/CreateOrganization", &svcv1.CreateOrganizationRequest{Name: "grpc-go", BillingEmail: "a@b.example"}, org); err != nil {
			t.Fatal(err)
		}
		if org.Plan != "enterprise" || org.MemberCount != 1 {
			t.Fatalf("got %v", org)
		}
		err := conn.Invoke(cctx, "/svc.v1.OrganizationService/CreateOrganization", &svcv1.CreateOrganizationRequest{Name: "grpc-go", BillingEmail: "a@b.example"}, org)
		st := status.Convert(err)
		if st.Code() != codes.AlreadyExists {
			t.Fatalf("got %v", err)
		}
		var reasons []string
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				reasons = append(reasons, ei.Domain+"/"+ei.Reason)
			}
		}
		if !slices.Equal(reasons, []string{"svc.v1.OrganizationService/ORGANIZATION_NAME_TAKEN"}) {
			t.Fatalf("ErrorInfo %v", reasons)
		}
		err = conn.Invoke(ctx, "/svc.v1.OrganizationService/ListOrganizations", &svcv1.ListOrganizationsRequest{}, new(svcv1.ListOrganizationsResponse))
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("without a token: %v", err)
		}
	})
}
