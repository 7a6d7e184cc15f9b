package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// stack is an issuer, a backend and the edge in front of it.
type stack struct {
	iss     string // issuer URL
	backend *testkit.Backend
	edge    *testkit.Edge
}

func startStack(t *testing.T, svc orgsvc.Config, change func(*config.Config)) (*stack, func(string) string) {
	t.Helper()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), svc)
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	if change != nil {
		change(cfg)
	}
	e := testkit.StartEdge(t, cfg)
	token := func(who string) string { return testkit.Token(t, iss.URL(), who) }
	return &stack{iss: iss.URL(), backend: be, edge: e}, token
}

// ctxT bounds a test's calls: a hung call fails the test instead of
// hanging the suite. Generous, since the stack tests run side by side.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func req[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

// wantError asserts the code and the one ErrorInfo a user sees, and returns
// the error for further checks.
func wantError(t *testing.T, err error, code connect.Code, reason, domain string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a %v error", err, code)
	}
	if ce.Code() != code {
		t.Fatalf("got %v: %s, want %v", ce.Code(), ce.Message(), code)
	}
	var infos []*errdetails.ErrorInfo
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				infos = append(infos, ei)
			}
		}
	}
	if len(infos) != 1 || infos[0].Reason != reason || infos[0].Domain != domain {
		t.Fatalf("ErrorInfo %v, want one %s/%s", infos, domain, reason)
	}
	return ce
}

func errorInfo(t *testing.T, ce *connect.Error) *errdetails.ErrorInfo {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ei
			}
		}
	}
	t.Fatal("no ErrorInfo")
	return nil
}

func TestEveryProtocolCallsTheBackendThroughTheEdge(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			ctx := ctxT(t)
			c := testkit.NewClients(s.edge.URL, p, token("pro-"+string(p)))
			name := "through-" + string(p)
			org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "a@b.example"}))
			if err != nil {
				t.Fatal(err)
			}
			if org.Msg.Name != name || org.Msg.Plan != "pro" || org.Header().Get("X-Request-Id") == "" {
				t.Fatalf("got %v, headers %v", org.Msg, org.Header())
			}
			got, err := c.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Msg.Id}))
			if err != nil || got.Msg.Id != org.Msg.Id {
				t.Fatalf("get: %v %v", got, err)
			}
			_, err = c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "a@b.example"}))
			wantError(t, err, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN", "svc.v1.OrganizationService")
			v, err := c.Blueprint.ValidateBlueprint(ctx, req(&svcv1.ValidateBlueprintRequest{Content: "name: x\nservices: {web: {image: nginx}}"}))
			if err != nil || !v.Msg.Valid {
				t.Fatalf("validate: %v %v", v, err)
			}
		})
	}
}

func TestJSONCallersGetErrorsInTheSpecShape(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	body := `{"organizationId":"org_missing"}`
	r, _ := http.NewRequest("POST", s.edge.URL+"/svc.v1.OrganizationService/GetOrganization", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token("alice"))
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct {
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Details []map[string]any `json:"details"`
	}
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusNotFound || e.Code != "not_found" || e.Message == "" || len(e.Details) != 1 {
		t.Fatalf("status %d, body %+v", res.StatusCode, e)
	}
	d := e.Details[0]
	want := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ORGANIZATION_NOT_FOUND", "domain": "svc.v1.OrganizationService", "type": "google.rpc.ErrorInfo"}
	for k, v := range want {
		if d[k] != v {
			t.Fatalf("detail %s = %v, want %v (detail %v)", k, d[k], v, d)
		}
	}
	if v, _ := d["value"].(string); v == "" {
		t.Fatalf("detail lost its Connect value: %v", d)
	}
}

func TestConnectProtoErrorsPassThroughByteForByte(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("alice")
	call := func(base string) (int, []byte) {
		r, _ := http.NewRequest("POST", base+"/svc.v1.OrganizationService/GetOrganization", bytes.NewReader([]byte{0x0a, 0x03, 'o', 'r', 'g'}))
		r.Header.Set("Content-Type", "application/proto")
		r.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	directStatus, direct := call(s.backend.URL)
	edgeStatus, viaEdge := call(s.edge.URL)
	if directStatus != edgeStatus || !bytes.Equal(direct, viaEdge) {
		t.Fatalf("backend said %d %s\nedge said %d %s", directStatus, direct, edgeStatus, viaEdge)
	}
}

func TestWatchStreamsThroughTheEdgeMessageByMessage(t *testing.T) {
	t.Parallel()
	// Provisioning lasts an hour: the stream cannot end by itself, so the
	// first message can only arrive if the edge forwards it at once.
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour, WatchPoll: 50 * time.Millisecond}, nil)
	ctx := ctxT(t)
	owner := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("carol"))
	org, err := owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "watchers", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []testkit.Protocol{testkit.ConnectProto, testkit.ConnectJSON, testkit.GRPC, testkit.GRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			env, err := owner.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "w-" + string(p), BlueprintId: "redis-7", ProjectId: prj.Msg.Id}))
			if err != nil {
				t.Fatal(err)
			}
			c := testkit.NewClients(s.edge.URL, p, token("carol"))
			stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() {
				t.Fatalf("no first message: %v", stream.Err())
			}
			if got := stream.Msg().Status; got != "PROVISIONING" {
				t.Fatalf("first status %s", got)
			}
			if _, err := owner.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id})); err != nil {
				t.Fatal(err)
			}
			if !stream.Receive() || stream.Msg().Status != "DELETED" {
				t.Fatalf("second message: %v %v", stream.Msg(), stream.Err())
			}
			if stream.Receive() || stream.Err() != nil {
				t.Fatalf("stream did not end cleanly: %v", stream.Err())
			}
		})
	}
}

func TestGRPCGoClientThroughTheEdge(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, nil)
	conn, err := grpc.NewClient(strings.TrimPrefix(s.edge.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := metadata.NewOutgoingContext(ctxT(t), metadata.Pairs("authorization", "Bearer "+token("bob")))

	org := new(svcv1.Organization)
	if err := conn.Invoke(ctx, "/svc.v1.OrganizationService/CreateOrganization", &svcv1.CreateOrganizationRequest{Name: "grpc-go", BillingEmail: "a@b.example"}, org); err != nil {
		t.Fatal(err)
	}
	err = conn.Invoke(ctx, "/svc.v1.OrganizationService/CreateOrganization", &svcv1.CreateOrganizationRequest{Name: "grpc-go", BillingEmail: "a@b.example"}, org)
	st := status.Convert(err)
	if st.Code() != codes.AlreadyExists || len(st.Details()) != 1 {
		t.Fatalf("status %v with details %v: trailers lost?", st.Code(), st.Details())
	}
	if ei, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || ei.Reason != "ORGANIZATION_NAME_TAKEN" {
		t.Fatalf("detail %v", st.Details()[0])
	}

	prj := new(svcv1.Project)
	if err := conn.Invoke(ctx, "/svc.v1.OrganizationService/CreateProject", &svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}, prj); err != nil {
		t.Fatal(err)
	}
	env := new(svcv1.CreateEnvironmentResponse)
	if err := conn.Invoke(ctx, "/svc.v1.EnvironmentService/CreateEnvironment", &svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Id}, env); err != nil {
		t.Fatal(err)
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/svc.v1.EnvironmentService/WatchEnvironment")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Environment.Id}); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	first := new(svcv1.WatchEnvironmentResponse)
	if err := stream.RecvMsg(first); err != nil || first.Status != "PROVISIONING" {
		t.Fatalf("first message %v, %v", first, err)
	}
	if err := conn.Invoke(ctx, "/svc.v1.EnvironmentService/DeleteEnvironment", &svcv1.DeleteEnvironmentRequest{EnvironmentId: env.Environment.Id}, new(svcv1.DeleteEnvironmentResponse)); err != nil {
		t.Fatal(err)
	}
	last := new(svcv1.WatchEnvironmentResponse)
	if err := stream.RecvMsg(last); err != nil || last.Status != "DELETED" {
		t.Fatalf("last message %v, %v", last, err)
	}
	if err := stream.RecvMsg(last); err != io.EOF {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
}

func TestAuthenticationFailuresInEveryProtocol(t *testing.T) {
	t.Parallel()
	s, _ := startStack(t, orgsvc.Config{}, nil)
	other := testkit.StartIssuer(t)
	claims, err := other.Issuer.ClaimsFor("alice")
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Issuer.Mint(claims)
	cases := []struct{ name, token, reason string }{
		{"Missing", "", "TOKEN_MISSING"},
		{"Garbage", "garbage", "TOKEN_INVALID"},
		{"OtherIssuer", foreign, "TOKEN_INVALID"},
	}
	for _, p := range testkit.Protocols {
		for _, c := range cases {
			t.Run(string(p)+"/"+c.name, func(t *testing.T) {
				cl := testkit.NewClients(s.edge.URL, p, c.token)
				_, err := cl.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
				ce := wantError(t, err, connect.CodeUnauthenticated, c.reason, "edge")
				unary := p == testkit.HTTPJSON || p == testkit.ConnectJSON || p == testkit.ConnectProto
				if got := ce.Meta().Get("WWW-Authenticate"); unary && got != `Bearer error="invalid_token"` {
					t.Fatalf("WWW-Authenticate %q", got)
				}
			})
		}
	}
}

func TestExpiredTokenRefusedAndRotatedKeyAcceptedWithoutRestart(t *testing.T) {
	t.Parallel()
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, be.URL, iss.URL()))
	ctx := ctxT(t)

	claims, _ := iss.Issuer.ClaimsFor("alice")
	claims["iat"], claims["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-5*time.Minute).Unix()
	expired, _ := iss.Issuer.Mint(claims)
	_, err := testkit.NewClients(e.URL, testkit.GRPC, expired).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
	wantError(t, err, connect.CodeUnauthenticated, "TOKEN_EXPIRED", "edge")

	before := testkit.Token(t, iss.URL(), "alice")
	if _, err := testkit.NewClients(e.URL, testkit.GRPC, before).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Issuer.RotateKey(); err != nil {
		t.Fatal(err)
	}
	after := testkit.Token(t, iss.URL(), "alice")
	if _, err := testkit.NewClients(e.URL, testkit.GRPC, after).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatalf("token signed with the rotated key: %v", err)
	}
}

func TestServiceAccountWithoutTheRoleIsDenied(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			viewer := testkit.NewClients(s.edge.URL, p, token("svc-viewer"))
			_, err := viewer.Org.CreateOrganization(ctxT(t), req(&svcv1.CreateOrganizationRequest{Name: "nope", BillingEmail: "a@b.example"}))
			ce := wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", "edge")
			if got := errorInfo(t, ce).Metadata["required_roles"]; got != "svc-admin" {
				t.Fatalf("required_roles %q", got)
			}
			manager := testkit.NewClients(s.edge.URL, p, token("svc-env-manager"))
			_, err = manager.Env.CreateEnvironment(ctxT(t), req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: "prj_missing"}))
			// Past the edge: the backend answers.
			wantError(t, err, connect.CodeNotFound, "PROJECT_NOT_FOUND", "svc.v1.EnvironmentService")
		})
	}
}

func TestUnknownProcedureIsUnimplementedAndBadContentTypeIs415(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("alice")
	for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			hc, opts := testkit.HTTP1Client, []connect.ClientOption{}
			switch p {
			case testkit.ConnectJSON:
				opts = append(opts, connect.WithProtoJSON())
			case testkit.GRPC:
				hc, opts = testkit.H2CClient, append(opts, connect.WithGRPC())
			case testkit.GRPCWeb:
				opts = append(opts, connect.WithGRPCWeb())
			}
			c := connect.NewClient[emptypb.Empty, emptypb.Empty](hc, s.edge.URL+"/svc.v1.OrganizationService/Teleport", opts...)
			r := req(&emptypb.Empty{})
			r.Header().Set("Authorization", "Bearer "+tok)
			_, err := c.CallUnary(ctxT(t), r)
			wantError(t, err, connect.CodeUnimplemented, "UNKNOWN_PROCEDURE", "edge")
		})
	}
	r, _ := http.NewRequest("POST", s.edge.URL+"/svc.v1.OrganizationService/ListOrganizations", strings.NewReader("{}"))
	r.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType || res.Header.Get("Accept-Post") == "" {
		t.Fatalf("status %d, Accept-Post %q", res.StatusCode, res.Header.Get("Accept-Post"))
	}
}

func TestOversizedRequestIsResourceExhausted(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Requests.MaxBodyBytes = 4 << 10 })
	big := strings.Repeat("x", 8<<10)
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(s.edge.URL, p, token("alice"))
			_, err := c.Org.CreateProject(ctxT(t), req(&svcv1.CreateProjectRequest{OrganizationId: "org_x", Name: "p", Description: big}))
			wantError(t, err, connect.CodeResourceExhausted, "REQUEST_TOO_LARGE", "edge")
		})
	}
}

func TestBackendDownIsUnavailable(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	// A port nobody listens on.
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, "http://127.0.0.1:1", iss.URL()))
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(e.URL, p, testkit.Token(t, iss.URL(), "alice"))
			_, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
			wantError(t, err, connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "edge")
		})
	}
}

func TestAdminListenerReportsHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("alice"))
	if _, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ok",
		"/metrics": `edge_requests_total{code="ok",method="ListOrganizations",protocol="grpc",service="svc.v1.OrganizationService"} 1`,
	} {
		res, err := http.Get(s.edge.AdminURL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %q, want %q", path, res.StatusCode, clip(b), want)
		}
	}
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300])
	}
	return string(b)
}

func errorAs(err error, target **connect.Error) bool { return errors.As(err, target) }
