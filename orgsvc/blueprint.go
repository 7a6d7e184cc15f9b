package orgsvc

import (
	"context"
	"encoding/base64"
	"strconv"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/orgsvc/catalog"
	"github.com/orgedge/edge/orgsvc/store"
)

// Bounds on BlueprintService requests.
const (
	maxQuery     = 200
	maxBlueprint = 1 << 20
)

// blueprints implements svcv1connect.BlueprintServiceHandler.
type blueprints struct{ *Service }

func (s blueprints) SearchCatalog(ctx context.Context, req *connect.Request[svcv1.SearchCatalogRequest]) (*connect.Response[svcv1.SearchCatalogResponse], error) {
	if _, err := allowServiceAccount(principalFrom(ctx), accessRead); err != nil {
		return nil, err
	}
	m := req.Msg
	var v fieldViolations
	v.text("query", m.Query, maxQuery)
	page := v.page(m.PageSize, m.PageToken)
	if err := v.err(); err != nil {
		return nil, err
	}
	all := s.catalog.Search(m.Query)
	from, err := offsetFromToken(page.Token, len(all))
	if err != nil {
		return nil, err
	}
	to := min(from+page.Size, len(all))
	res := &svcv1.SearchCatalogResponse{}
	for _, b := range all[from:to] {
		res.Blueprints = append(res.Blueprints, &svcv1.Blueprint{
			Id: b.ID, Name: b.Name, Description: b.Description, Tags: b.Tags, Vcpus: b.VCPUs, MemoryGb: b.MemoryGB,
		})
	}
	if to < len(all) {
		res.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(to)))
	}
	return connect.NewResponse(res), nil
}

func offsetFromToken(token string, n int) (int, error) {
	if token == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, store.ErrInvalidPageToken
	}
	off, err := strconv.Atoi(string(b))
	if err != nil || off < 0 || off > n {
		return 0, store.ErrInvalidPageToken
	}
	return off, nil
}

func (s blueprints) ValidateBlueprint(ctx context.Context, req *connect.Request[svcv1.ValidateBlueprintRequest]) (*connect.Response[svcv1.ValidateBlueprintResponse], error) {
	if _, err := allowServiceAccount(principalFrom(ctx), accessEnv); err != nil {
		return nil, err
	}
	var v fieldViolations
	if n := len(req.Msg.Content); n > maxBlueprint {
		v.add("content", "must be at most %d bytes, got %d", maxBlueprint, n)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	res := &svcv1.ValidateBlueprintResponse{}
	for _, vi := range catalog.Validate(req.Msg.Content) {
		res.Violations = append(res.Violations, &svcv1.Violation{Path: vi.Path, Message: vi.Message})
	}
	res.Valid = len(res.Violations) == 0
	return connect.NewResponse(res), nil
}
