//lint:file-ignore SA1019 v1alpha reflection is deprecated, and still what older clients speak: the edge answers it, so the test calls it.

package edge_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/orgedge/edge/edge/limits"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/orgsvc"
)

// TestGRPCReflectionThroughTheEdgeListsAndDescribesTheAPI: grpc-go's
// reflection client, as grpcurl and buf curl use it, lists the API's
// services through the edge (v1 and v1alpha) and gets the file that
// describes WatchEnvironment as a server stream, with a token of any role;
// without a token it is unauthenticated. Reflection goes through the
// chain like any call but is not charged to the plan (it has a rate of its
// own): a subject whose plan admits one call still makes it after three
// reflection streams, so that grpcurl and buf curl, which reflect before
// each call, show a subject over its plan the refusal of its call.
func TestGRPCReflectionThroughTheEdgeListsAndDescribesTheAPI(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, tinyPlan(1))
	conn, err := grpc.NewClient(strings.TrimPrefix(s.edge.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	viewer := metadata.NewOutgoingContext(ctxT(t), metadata.Pairs("authorization", "Bearer "+token("svc-viewer")))

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(viewer)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(r *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var names []string
	for _, svc := range ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}).GetListServicesResponse().GetService() {
		names = append(names, svc.Name)
	}
	slices.Sort(names)
	want := []string{"svc.v1.BlueprintService", "svc.v1.EnvironmentService", "svc.v1.OrganizationService", "svc.v1.UsageService"}
	if !slices.Equal(names, want) {
		t.Fatalf("v1 lists %v, want %v", names, want)
	}
	res := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "svc.v1.EnvironmentService"}})
	files := &descriptorpb.FileDescriptorSet{}
	for _, raw := range res.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, fd); err != nil {
			t.Fatal(err)
		}
		files.File = append(files.File, fd)
	}
	reg, err := protodesc.NewFiles(files)
	if err != nil {
		t.Fatalf("the files reflection sent do not stand alone: %v", err)
	}
	d, err := reg.FindDescriptorByName("svc.v1.EnvironmentService.WatchEnvironment")
	if err != nil {
		t.Fatal(err)
	}
	if md := d.(protoreflect.MethodDescriptor); !md.IsStreamingServer() || md.Input().FullName() != "svc.v1.WatchEnvironmentRequest" {
		t.Fatalf("WatchEnvironment described as %v", md)
	}
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v", err)
	}

	for range 2 {
		alpha, err := reflectionalphapb.NewServerReflectionClient(conn).ServerReflectionInfo(viewer)
		if err != nil {
			t.Fatal(err)
		}
		if err := alpha.Send(&reflectionalphapb.ServerReflectionRequest{MessageRequest: &reflectionalphapb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		r, err := alpha.Recv()
		if err != nil || len(r.GetListServicesResponse().GetService()) != len(want) {
			t.Fatalf("v1alpha: %v %v", r, err)
		}
		_ = alpha.CloseSend()
	}

	anon, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctxT(t))
	if err == nil {
		_ = anon.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = anon.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v, want unauthenticated", err)
	}

	// The plan (one call) is untouched by the three reflection streams.
	if err := conn.Invoke(viewer, "/svc.v1.OrganizationService/ListOrganizations", &svcv1.ListOrganizationsRequest{}, new(svcv1.ListOrganizationsResponse)); err != nil {
		t.Fatalf("the one call the plan admits, after reflection: %v", err)
	}
	// Reflection has a rate of its own, per subject: streams one after
	// another are admitted at most as the rate allows by then (its burst,
	// and what refilled since), then refused. On a machine so busy that
	// each stream takes longer than the rate refills, none need be
	// refused; none may pass beyond the rate.
	start := time.Now()
	for admitted := 0; admitted < 3*limits.BuiltinBurst; admitted++ {
		alpha, err := reflectionalphapb.NewServerReflectionClient(conn).ServerReflectionInfo(viewer)
		if err == nil {
			_ = alpha.CloseSend()
			_, err = alpha.Recv()
		}
		if status.Code(err) == codes.ResourceExhausted {
			return
		}
		if err != nil && !errors.Is(err, io.EOF) { // EOF: admitted, and ended as its client closed it
			t.Fatalf("reflection stream %d: %v", admitted+1, err)
		}
		refilled := int(time.Since(start).Minutes() * float64(limits.BuiltinPerMinute))
		if allowed := limits.BuiltinBurst + refilled + 1; admitted+1 > allowed {
			t.Fatalf("%d reflection streams admitted in %v, want at most %d: reflection's own rate (%d a minute, burst %d)",
				admitted+1, time.Since(start).Round(time.Millisecond), allowed, limits.BuiltinPerMinute, limits.BuiltinBurst)
		}
	}
}
