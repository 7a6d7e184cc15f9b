package testkit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// JSONClient calls the API the way a simple integration does: POST a JSON
// body with net/http and read a JSON answer. It implements the generated
// client interfaces so that one test suite runs over every protocol; errors
// come back as *connect.Error decoded from the JSON error body.
type JSONClient struct {
	HTTP    *http.Client
	BaseURL string
	Header  http.Header // sent with every call (e.g. Authorization)
}

// ErrNoStreaming is returned for streaming methods, which plain HTTP/JSON
// integrations do not call.
var ErrNoStreaming = errors.New("testkit: the plain JSON client does not stream")

// maxResponse bounds what the client reads.
const maxResponse = 8 << 20

// Call posts in as JSON to procedure ("/svc.v1.Service/Method") and decodes
// the answer into out. It returns the response headers.
func (c *JSONClient) Call(ctx context.Context, procedure string, in, out proto.Message, header http.Header) (http.Header, error) {
	body, err := protojson.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.BaseURL, "/")+procedure, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return res.Header, err
	}
	if res.StatusCode != http.StatusOK {
		return res.Header, decodeError(res, data)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return res.Header, fmt.Errorf("testkit: response Content-Type %q, want application/json", ct)
	}
	return res.Header, protojson.Unmarshal(data, out)
}

// wireError is the JSON error body: Connect's shape, plus the spec's "@type"
// entries when the edge adds them.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"details"`
}

func decodeError(res *http.Response, data []byte) error {
	var w wireError
	if err := json.Unmarshal(data, &w); err != nil || w.Code == "" {
		return fmt.Errorf("testkit: HTTP %d with a body that is no error: %q", res.StatusCode, truncate(data))
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(w.Code)); err != nil {
		return fmt.Errorf("testkit: unknown error code %q", w.Code)
	}
	ce := connect.NewError(code, errors.New(w.Message))
	for _, d := range w.Details {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			return fmt.Errorf("testkit: detail %s: value is not base64: %w", d.Type, err)
		}
		msg, err := anypb.UnmarshalNew(&anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: raw}, proto.UnmarshalOptions{})
		if err != nil {
			return fmt.Errorf("testkit: detail %s: %w", d.Type, err)
		}
		detail, err := connect.NewErrorDetail(msg)
		if err != nil {
			return err
		}
		ce.AddDetail(detail)
	}
	for k, vs := range res.Header {
		ce.Meta()[k] = vs
	}
	return ce
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// call adapts Call to the generated clients' signatures.
func call[Req, Res any, PReq interface {
	*Req
	proto.Message
}, PRes interface {
	*Res
	proto.Message
}](ctx context.Context, c *JSONClient, procedure string, req *connect.Request[Req]) (*connect.Response[Res], error) {
	out := PRes(new(Res))
	h, err := c.Call(ctx, procedure, PReq(req.Msg), out, req.Header())
	if err != nil {
		return nil, err
	}
	res := connect.NewResponse((*Res)(out))
	for k, vs := range h {
		res.Header()[k] = vs
	}
	return res, nil
}

var (
	_ svcv1connect.OrganizationServiceClient = (*JSONClient)(nil)
	_ svcv1connect.EnvironmentServiceClient  = (*JSONClient)(nil)
	_ svcv1connect.BlueprintServiceClient    = (*JSONClient)(nil)
	_ svcv1connect.UsageServiceClient        = (*JSONClient)(nil)
)

func (c *JSONClient) CreateOrganization(ctx context.Context, r *connect.Request[svcv1.CreateOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	return call[svcv1.CreateOrganizationRequest, svcv1.Organization](ctx, c, svcv1connect.OrganizationServiceCreateOrganizationProcedure, r)
}

func (c *JSONClient) GetOrganization(ctx context.Context, r *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	return call[svcv1.GetOrganizationRequest, svcv1.Organization](ctx, c, svcv1connect.OrganizationServiceGetOrganizationProcedure, r)
}

func (c *JSONClient) ListOrganizations(ctx context.Context, r *connect.Request[svcv1.ListOrganizationsRequest]) (*connect.Response[svcv1.ListOrganizationsResponse], error) {
	return call[svcv1.ListOrganizationsRequest, svcv1.ListOrganizationsResponse](ctx, c, svcv1connect.OrganizationServiceListOrganizationsProcedure, r)
}

func (c *JSONClient) UpdateOrganization(ctx context.Context, r *connect.Request[svcv1.UpdateOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	return call[svcv1.UpdateOrganizationRequest, svcv1.Organization](ctx, c, svcv1connect.OrganizationServiceUpdateOrganizationProcedure, r)
}

func (c *JSONClient) DeleteOrganization(ctx context.Context, r *connect.Request[svcv1.DeleteOrganizationRequest]) (*connect.Response[svcv1.DeleteOrganizationResponse], error) {
	return call[svcv1.DeleteOrganizationRequest, svcv1.DeleteOrganizationResponse](ctx, c, svcv1connect.OrganizationServiceDeleteOrganizationProcedure, r)
}

func (c *JSONClient) CreateProject(ctx context.Context, r *connect.Request[svcv1.CreateProjectRequest]) (*connect.Response[svcv1.Project], error) {
	return call[svcv1.CreateProjectRequest, svcv1.Project](ctx, c, svcv1connect.OrganizationServiceCreateProjectProcedure, r)
}

func (c *JSONClient) GetProject(ctx context.Context, r *connect.Request[svcv1.GetProjectRequest]) (*connect.Response[svcv1.Project], error) {
	return call[svcv1.GetProjectRequest, svcv1.Project](ctx, c, svcv1connect.OrganizationServiceGetProjectProcedure, r)
}

func (c *JSONClient) ListProjects(ctx context.Context, r *connect.Request[svcv1.ListProjectsRequest]) (*connect.Response[svcv1.ListProjectsResponse], error) {
	return call[svcv1.ListProjectsRequest, svcv1.ListProjectsResponse](ctx, c, svcv1connect.OrganizationServiceListProjectsProcedure, r)
}

func (c *JSONClient) UpdateProject(ctx context.Context, r *connect.Request[svcv1.UpdateProjectRequest]) (*connect.Response[svcv1.Project], error) {
	return call[svcv1.UpdateProjectRequest, svcv1.Project](ctx, c, svcv1connect.OrganizationServiceUpdateProjectProcedure, r)
}

func (c *JSONClient) DeleteProject(ctx context.Context, r *connect.Request[svcv1.DeleteProjectRequest]) (*connect.Response[svcv1.DeleteProjectResponse], error) {
	return call[svcv1.DeleteProjectRequest, svcv1.DeleteProjectResponse](ctx, c, svcv1connect.OrganizationServiceDeleteProjectProcedure, r)
}

func (c *JSONClient) InviteMember(ctx context.Context, r *connect.Request[svcv1.InviteMemberRequest]) (*connect.Response[svcv1.Invitation], error) {
	return call[svcv1.InviteMemberRequest, svcv1.Invitation](ctx, c, svcv1connect.OrganizationServiceInviteMemberProcedure, r)
}

func (c *JSONClient) ListMembers(ctx context.Context, r *connect.Request[svcv1.ListMembersRequest]) (*connect.Response[svcv1.ListMembersResponse], error) {
	return call[svcv1.ListMembersRequest, svcv1.ListMembersResponse](ctx, c, svcv1connect.OrganizationServiceListMembersProcedure, r)
}

func (c *JSONClient) UpdateMember(ctx context.Context, r *connect.Request[svcv1.UpdateMemberRequest]) (*connect.Response[svcv1.Member], error) {
	return call[svcv1.UpdateMemberRequest, svcv1.Member](ctx, c, svcv1connect.OrganizationServiceUpdateMemberProcedure, r)
}

func (c *JSONClient) RemoveMember(ctx context.Context, r *connect.Request[svcv1.RemoveMemberRequest]) (*connect.Response[svcv1.RemoveMemberResponse], error) {
	return call[svcv1.RemoveMemberRequest, svcv1.RemoveMemberResponse](ctx, c, svcv1connect.OrganizationServiceRemoveMemberProcedure, r)
}

func (c *JSONClient) CreateEnvironment(ctx context.Context, r *connect.Request[svcv1.CreateEnvironmentRequest]) (*connect.Response[svcv1.CreateEnvironmentResponse], error) {
	return call[svcv1.CreateEnvironmentRequest, svcv1.CreateEnvironmentResponse](ctx, c, svcv1connect.EnvironmentServiceCreateEnvironmentProcedure, r)
}

func (c *JSONClient) ListEnvironments(ctx context.Context, r *connect.Request[svcv1.ListEnvironmentsRequest]) (*connect.Response[svcv1.ListEnvironmentsResponse], error) {
	return call[svcv1.ListEnvironmentsRequest, svcv1.ListEnvironmentsResponse](ctx, c, svcv1connect.EnvironmentServiceListEnvironmentsProcedure, r)
}

func (c *JSONClient) GetEnvironment(ctx context.Context, r *connect.Request[svcv1.GetEnvironmentRequest]) (*connect.Response[svcv1.GetEnvironmentResponse], error) {
	return call[svcv1.GetEnvironmentRequest, svcv1.GetEnvironmentResponse](ctx, c, svcv1connect.EnvironmentServiceGetEnvironmentProcedure, r)
}

func (c *JSONClient) WatchEnvironment(context.Context, *connect.Request[svcv1.WatchEnvironmentRequest]) (*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse], error) {
	return nil, ErrNoStreaming
}

func (c *JSONClient) DeleteEnvironment(ctx context.Context, r *connect.Request[svcv1.DeleteEnvironmentRequest]) (*connect.Response[svcv1.DeleteEnvironmentResponse], error) {
	return call[svcv1.DeleteEnvironmentRequest, svcv1.DeleteEnvironmentResponse](ctx, c, svcv1connect.EnvironmentServiceDeleteEnvironmentProcedure, r)
}

func (c *JSONClient) SearchCatalog(ctx context.Context, r *connect.Request[svcv1.SearchCatalogRequest]) (*connect.Response[svcv1.SearchCatalogResponse], error) {
	return call[svcv1.SearchCatalogRequest, svcv1.SearchCatalogResponse](ctx, c, svcv1connect.BlueprintServiceSearchCatalogProcedure, r)
}

func (c *JSONClient) ValidateBlueprint(ctx context.Context, r *connect.Request[svcv1.ValidateBlueprintRequest]) (*connect.Response[svcv1.ValidateBlueprintResponse], error) {
	return call[svcv1.ValidateBlueprintRequest, svcv1.ValidateBlueprintResponse](ctx, c, svcv1connect.BlueprintServiceValidateBlueprintProcedure, r)
}

func (c *JSONClient) GetUsage(ctx context.Context, r *connect.Request[svcv1.GetUsageRequest]) (*connect.Response[svcv1.GetUsageResponse], error) {
	return call[svcv1.GetUsageRequest, svcv1.GetUsageResponse](ctx, c, svcv1connect.UsageServiceGetUsageProcedure, r)
}
