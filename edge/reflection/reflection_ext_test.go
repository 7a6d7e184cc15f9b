//lint:file-ignore SA1019 v1alpha reflection is deprecated, and still what older clients speak: the handler answers it, so the test calls it.

package reflection_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/orgedge/edge/edge/reflection"
)

// serve puts the handler alone behind a cleartext HTTP/2 server, as the
// chain would hand it a reflection call, and returns a gRPC connection to
// it: grpc-go's reflection client is the one grpcurl and buf curl use.
func serve(t *testing.T, o reflection.Options) *grpc.ClientConn {
	t.Helper()
	s := httptest.NewUnstartedServer(reflection.New(o))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	conn, err := grpc.NewClient(strings.TrimPrefix(s.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var roomy = reflection.Options{Timeout: time.Minute, MaxBytes: 1 << 20}

func ask(t *testing.T, stream reflectionpb.ServerReflection_ServerReflectionInfoClient, r *reflectionpb.ServerReflectionRequest) (*reflectionpb.ServerReflectionResponse, error) {
	t.Helper()
	if err := stream.Send(r); err != nil {
		t.Fatal(err)
	}
	return stream.Recv()
}

func TestListServicesNamesTheAPIsServicesAndTheBuiltIns(t *testing.T) {
	stream, err := reflectionpb.NewServerReflectionClient(serve(t, roomy)).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ask(t, stream, &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range res.GetListServicesResponse().GetService() {
		names = append(names, svc.Name)
	}
	for _, want := range []string{"svc.v1.BlueprintService", "svc.v1.EnvironmentService", "svc.v1.OrganizationService", "svc.v1.UsageService"} {
		if !slices.Contains(names, want) {
			t.Errorf("ListServices %v lacks %s", names, want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("ListServices %v is not sorted", names)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want the stream's clean end", err)
	}
}

func TestFileContainingSymbolSendsFilesThatStandAlone(t *testing.T) {
	stream, err := reflectionpb.NewServerReflectionClient(serve(t, roomy)).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ask(t, stream, &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "svc.v1.EnvironmentService"}})
	if err != nil {
		t.Fatal(err)
	}
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
		t.Fatalf("the files sent do not stand alone (a dependency missing): %v", err)
	}
	d, err := reg.FindDescriptorByName("svc.v1.EnvironmentService.WatchEnvironment")
	if err != nil {
		t.Fatal(err)
	}
	if md := d.(protoreflect.MethodDescriptor); !md.IsStreamingServer() || md.Input().FullName() != "svc.v1.WatchEnvironmentRequest" {
		t.Fatalf("WatchEnvironment described as %v", md)
	}

	// A symbol the API does not have is an answer on the stream, not its end.
	res, err = ask(t, stream, &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "svc.v1.NoSuchService"}})
	if err != nil {
		t.Fatalf("an unknown symbol ended the stream: %v", err)
	}
	if code := codes.Code(res.GetErrorResponse().GetErrorCode()); code != codes.NotFound {
		t.Fatalf("an unknown symbol: error code %v, want NotFound", code)
	}
}

func TestV1AlphaIsAnsweredForOlderClients(t *testing.T) {
	stream, err := reflectionalphapb.NewServerReflectionClient(serve(t, roomy)).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionalphapb.ServerReflectionRequest{MessageRequest: &reflectionalphapb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.GetListServicesResponse().GetService()); n < 4 {
		t.Fatalf("v1alpha lists %d services, want the API's", n)
	}
}

func TestARequestMessagePastItsBoundEndsTheStreamResourceExhausted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
		symbol   int
	}{
		{"past requests.max_body_bytes", 1 << 10, 2 << 10},
		{"past MaxMessageBytes however large the body bound", 1 << 20, reflection.MaxMessageBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := roomy
			o.MaxBytes = tc.maxBytes
			stream, err := reflectionpb.NewServerReflectionClient(serve(t, o)).ServerReflectionInfo(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ask(t, stream, &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
				FileContainingSymbol: "svc.v1." + strings.Repeat("A", tc.symbol)}})
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("a %d-byte symbol: %v, want ResourceExhausted", tc.symbol, err)
			}
		})
	}
	// Within the bound, a long name is only unknown.
	o := roomy
	o.MaxBytes = 4 << 10
	stream, err := reflectionpb.NewServerReflectionClient(serve(t, o)).ServerReflectionInfo(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ask(t, stream, &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "svc.v1." + strings.Repeat("A", 2<<10)}})
	if err != nil || codes.Code(res.GetErrorResponse().GetErrorCode()) != codes.NotFound {
		t.Fatalf("a 2 KiB symbol within a 4 KiB bound: %v, %v; want NotFound on the stream", res, err)
	}
}
