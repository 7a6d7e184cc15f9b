package interop_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// The free plan of the test's edges: a small bucket, so that a client meets
// a rate refusal within a few calls, refilled slowly (a call every 3 s) so
// that it does not refill while a client empties it.
const (
	freeBurst     = 5
	freePerMinute = 20
)

// stack is a development issuer, a backend and an edge in front of it, and
// optionally a second edge whose backend is down.
type stack struct {
	issuer string
	edge   *testkit.Edge
	// dead is an edge whose backend does not listen: every call that
	// passes the limits is answered unavailable by the edge itself.
	dead *testkit.Edge
	// descriptors is a FileDescriptorSet file of the API and the error
	// details, for the clients that take a schema.
	descriptors string
}

type stackOptions struct {
	// origin is a page origin the edge allows (CORS); "" for none.
	origin string
	// dead starts stack.dead too.
	dead bool
}

func startStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	iss := testkit.StartIssuer(t)
	// Environments stay PROVISIONING until deleted: a watch sees the
	// deletion as its one change, whenever the client gets to it.
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{ProvisionDelay: time.Hour})
	s := &stack{issuer: iss.URL(), descriptors: writeDescriptors(t)}
	s.edge = testkit.StartEdge(t, edgeConfig(t, be.URL, iss.URL(), o.origin))
	if o.dead {
		down := "http://" + testkit.DeadAddr(t) // the backend is down
		s.dead = testkit.StartEdge(t, edgeConfig(t, down, iss.URL(), ""))
	}
	return s
}

// edgeConfig is the test edge's configuration, with the small free plan,
// allowing pages of origin as an operator's file would (cors.allowed_origins).
func edgeConfig(t *testing.T, upstreamURL, issuerURL, origin string) *config.Config {
	t.Helper()
	base := config.Default()
	if origin != "" {
		base.CORS.AllowedOrigins = []string{origin}
	}
	cfg := testkit.EdgeConfigFrom(t, base, upstreamURL, issuerURL)
	free := cfg.Limits.Plans["free"]
	free.Burst, free.RequestsPerMinute = freeBurst, freePerMinute
	cfg.Limits.Plans["free"] = free
	return cfg
}

// token is a token of the development issuer for who (see testkit.Token):
// pro-x and free-x are people on those plans.
func (s *stack) token(t *testing.T, who string) string {
	t.Helper()
	return testkit.Token(t, s.issuer, who)
}

// project creates an organization and a project as token's subject and
// returns the project's id.
func (s *stack) project(t *testing.T, token, name string) string {
	t.Helper()
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token)
	org, err := c.Org.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, connect.NewRequest(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	return prj.Msg.Id
}

// writeDescriptors writes the API's files, google.rpc.Status and the error
// details, with every file they import, as a FileDescriptorSet (imports
// before importers) and returns its path.
func writeDescriptors(t *testing.T) string {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range []protoreflect.FileDescriptor{
		svcv1.File_svc_v1_organization_proto, svcv1.File_svc_v1_environment_proto,
		svcv1.File_svc_v1_blueprint_proto, svcv1.File_svc_v1_usage_proto,
		rpcstatus.File_google_rpc_status_proto, errdetails.File_google_rpc_error_details_proto,
	} {
		add(fd)
	}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "api.binpb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ctxT bounds what a test waits for: a hung client fails the test instead
// of hanging the suite.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
