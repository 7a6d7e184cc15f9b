package orgsvc

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/orgsvc/store"
)

// organizations implements svcv1connect.OrganizationServiceHandler.
type organizations struct{ *Service }

// plans a token's plan claim may name; anything else makes an organization free.
var plans = map[string]bool{"free": true, "pro": true, "enterprise": true}

func (s organizations) CreateOrganization(ctx context.Context, req *connect.Request[svcv1.CreateOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	m := req.Msg
	var v fieldViolations
	v.name("name", m.Name)
	v.text("display_name", m.DisplayName, maxDisplayName)
	v.email("billing_email", m.BillingEmail)
	if err := v.err(); err != nil {
		return nil, err
	}
	p := principalFrom(ctx)
	if _, err := allowServiceAccount(p, accessAdmin); err != nil {
		return nil, err
	}
	now := s.now()
	org := store.Organization{Name: m.Name, DisplayName: m.DisplayName, BillingEmail: m.BillingEmail, Plan: "free", CreatedAt: now}
	if org.DisplayName == "" {
		org.DisplayName = m.Name
	}
	var admin *store.Member
	if !p.ServiceAccount() {
		if plans[p.Plan] {
			org.Plan = p.Plan
		}
		admin = &store.Member{UserID: p.Subject, Email: p.Email, Name: p.DisplayName(), Role: store.RoleAdmin, Status: store.MemberActive, JoinedAt: now, LastActiveAt: now}
	}
	org, err := s.store.CreateOrganization(ctx, org, admin)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(organizationPB(org)), nil
}

func (s organizations) GetOrganization(ctx context.Context, req *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	id := req.Msg.OrganizationId
	if err := s.orgAccess(ctx, id, accessRead, asMember); err != nil {
		return nil, err
	}
	org, err := s.store.GetOrganization(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(organizationPB(org)), nil
}

func (s organizations) ListOrganizations(ctx context.Context, req *connect.Request[svcv1.ListOrganizationsRequest]) (*connect.Response[svcv1.ListOrganizationsResponse], error) {
	var v fieldViolations
	page := v.page(req.Msg.PageSize, req.Msg.PageToken)
	if err := v.err(); err != nil {
		return nil, err
	}
	p := principalFrom(ctx)
	member := p.Subject
	if ok, err := allowServiceAccount(p, accessRead); err != nil {
		return nil, err
	} else if ok {
		member = "" // service accounts see every organization
	}
	orgs, next, err := s.store.ListOrganizations(ctx, member, page)
	if err != nil {
		return nil, err
	}
	res := &svcv1.ListOrganizationsResponse{NextPageToken: next, Organizations: make([]*svcv1.OrganizationSummary, len(orgs))}
	for i, o := range orgs {
		res.Organizations[i] = &svcv1.OrganizationSummary{
			Id: o.ID, Name: o.Name, DisplayName: o.DisplayName, Role: o.Role,
			ProjectCount: o.ProjectCount, MemberCount: o.MemberCount,
		}
	}
	return connect.NewResponse(res), nil
}

func (s organizations) UpdateOrganization(ctx context.Context, req *connect.Request[svcv1.UpdateOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessAdmin, asAdmin); err != nil {
		return nil, err
	}
	var v fieldViolations
	if m.DisplayName != nil {
		v.text("display_name", *m.DisplayName, maxDisplayName)
	}
	if m.BillingEmail != nil {
		v.email("billing_email", *m.BillingEmail)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	org, err := s.store.UpdateOrganization(ctx, m.OrganizationId, m.DisplayName, m.BillingEmail)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(organizationPB(org)), nil
}

func (s organizations) DeleteOrganization(ctx context.Context, req *connect.Request[svcv1.DeleteOrganizationRequest]) (*connect.Response[svcv1.DeleteOrganizationResponse], error) {
	if err := s.orgAccess(ctx, req.Msg.OrganizationId, accessAdmin, asAdmin); err != nil {
		return nil, err
	}
	ended, err := s.store.DeleteOrganization(ctx, req.Msg.OrganizationId, req.Msg.Force, s.now())
	if err != nil {
		return nil, err
	}
	s.watchers.ended(ended)
	res := connect.NewResponse(&svcv1.DeleteOrganizationResponse{})
	listEnded(res.Header(), ended)
	return res, nil
}

func (s organizations) CreateProject(ctx context.Context, req *connect.Request[svcv1.CreateProjectRequest]) (*connect.Response[svcv1.Project], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessAdmin, asMember); err != nil {
		return nil, err
	}
	var v fieldViolations
	v.name("name", m.Name)
	v.text("description", m.Description, maxDescription)
	if err := v.err(); err != nil {
		return nil, err
	}
	p, err := s.store.CreateProject(ctx, store.Project{OrganizationID: m.OrganizationId, Name: m.Name, Description: m.Description, CreatedAt: s.now()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(projectPB(p)), nil
}

func (s organizations) GetProject(ctx context.Context, req *connect.Request[svcv1.GetProjectRequest]) (*connect.Response[svcv1.Project], error) {
	p, err := s.project(ctx, req.Msg.ProjectId, accessRead, asMember)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(projectPB(p)), nil
}

func (s organizations) ListProjects(ctx context.Context, req *connect.Request[svcv1.ListProjectsRequest]) (*connect.Response[svcv1.ListProjectsResponse], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessRead, asMember); err != nil {
		return nil, err
	}
	var v fieldViolations
	page := v.page(m.PageSize, m.PageToken)
	if err := v.err(); err != nil {
		return nil, err
	}
	ps, next, err := s.store.ListProjects(ctx, m.OrganizationId, page)
	if err != nil {
		return nil, err
	}
	res := &svcv1.ListProjectsResponse{NextPageToken: next, Projects: make([]*svcv1.ProjectSummary, len(ps))}
	for i, p := range ps {
		res.Projects[i] = &svcv1.ProjectSummary{Id: p.ID, Name: p.Name, EnvironmentCount: p.EnvironmentCount, BlueprintCount: p.BlueprintCount}
	}
	return connect.NewResponse(res), nil
}

func (s organizations) UpdateProject(ctx context.Context, req *connect.Request[svcv1.UpdateProjectRequest]) (*connect.Response[svcv1.Project], error) {
	m := req.Msg
	if _, err := s.project(ctx, m.ProjectId, accessAdmin, asMember); err != nil {
		return nil, err
	}
	var v fieldViolations
	if m.Name != nil {
		v.name("name", *m.Name)
	}
	if m.Description != nil {
		v.text("description", *m.Description, maxDescription)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	p, err := s.store.UpdateProject(ctx, m.ProjectId, m.Name, m.Description)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(projectPB(p)), nil
}

func (s organizations) DeleteProject(ctx context.Context, req *connect.Request[svcv1.DeleteProjectRequest]) (*connect.Response[svcv1.DeleteProjectResponse], error) {
	if _, err := s.project(ctx, req.Msg.ProjectId, accessAdmin, asAdmin); err != nil {
		return nil, err
	}
	ended, err := s.store.DeleteProject(ctx, req.Msg.ProjectId, req.Msg.Force, s.now())
	if err != nil {
		return nil, err
	}
	s.watchers.ended(ended)
	res := connect.NewResponse(&svcv1.DeleteProjectResponse{})
	listEnded(res.Header(), ended)
	return res, nil
}

func (s organizations) InviteMember(ctx context.Context, req *connect.Request[svcv1.InviteMemberRequest]) (*connect.Response[svcv1.Invitation], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessAdmin, asAdmin); err != nil {
		return nil, err
	}
	var v fieldViolations
	v.email("email", m.Email)
	v.role("role", m.Role)
	if err := v.err(); err != nil {
		return nil, err
	}
	now := s.now()
	inv, err := s.store.Invite(ctx, store.Invitation{
		OrganizationID: m.OrganizationId, Email: m.Email, Role: m.Role, Status: store.InvitationPending,
		InvitedAt: now, ExpiresAt: now.Add(s.invitationTTL),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(invitationPB(inv)), nil
}

// maxInvitationsListed bounds the pending invitations ListMembers returns.
const maxInvitationsListed = 1000

func (s organizations) ListMembers(ctx context.Context, req *connect.Request[svcv1.ListMembersRequest]) (*connect.Response[svcv1.ListMembersResponse], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessRead, asMember); err != nil {
		return nil, err
	}
	var v fieldViolations
	page := v.page(m.PageSize, m.PageToken)
	if err := v.err(); err != nil {
		return nil, err
	}
	ms, next, err := s.store.ListMembers(ctx, m.OrganizationId, page)
	if err != nil {
		return nil, err
	}
	res := &svcv1.ListMembersResponse{NextPageToken: next, Members: make([]*svcv1.Member, len(ms))}
	for i, mb := range ms {
		res.Members[i] = memberPB(mb)
	}
	if m.IncludeInvitations && m.PageToken == "" {
		invs, err := s.store.ListInvitations(ctx, m.OrganizationId, s.now(), maxInvitationsListed)
		if err != nil {
			return nil, err
		}
		for _, inv := range invs {
			res.Invitations = append(res.Invitations, invitationPB(inv))
		}
	}
	return connect.NewResponse(res), nil
}

func (s organizations) UpdateMember(ctx context.Context, req *connect.Request[svcv1.UpdateMemberRequest]) (*connect.Response[svcv1.Member], error) {
	m := req.Msg
	if err := s.orgAccess(ctx, m.OrganizationId, accessAdmin, asAdmin); err != nil {
		return nil, err
	}
	var v fieldViolations
	v.id("user_id", m.UserId)
	u := store.MemberUpdate{Role: m.Role, Status: m.GetStatus()}
	switch {
	case m.Status != nil:
		v.status("status", u.Status)
		if u.Role != "" {
			v.role("role", u.Role)
		}
	default:
		v.role("role", u.Role) // nothing to change without a role
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	mb, err := s.store.UpdateMember(ctx, m.OrganizationId, m.UserId, u)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(memberPB(mb)), nil
}

func (s organizations) RemoveMember(ctx context.Context, req *connect.Request[svcv1.RemoveMemberRequest]) (*connect.Response[svcv1.RemoveMemberResponse], error) {
	m := req.Msg
	var v fieldViolations
	v.id("user_id", m.UserId)
	if err := v.err(); err != nil {
		return nil, err
	}
	need := asAdmin
	if m.UserId == principalFrom(ctx).Subject {
		need = asMember // leaving an organization needs no admin
	}
	if err := s.orgAccess(ctx, m.OrganizationId, accessAdmin, need); err != nil {
		return nil, err
	}
	if err := s.store.RemoveMember(ctx, m.OrganizationId, m.UserId); err != nil {
		return nil, err
	}
	return connect.NewResponse(&svcv1.RemoveMemberResponse{}), nil
}

// orgAccess validates an organization id and authorizes the caller on it.
func (s *Service) orgAccess(ctx context.Context, orgID string, a access, need orgRole) error {
	var v fieldViolations
	v.id("organization_id", orgID)
	if err := v.err(); err != nil {
		return err
	}
	return s.authorize(ctx, orgID, a, need, store.ErrOrganizationNotFound)
}

// project loads a project and authorizes the caller on its organization.
func (s *Service) project(ctx context.Context, id string, a access, need orgRole) (store.Project, error) {
	var v fieldViolations
	v.id("project_id", id)
	if err := v.err(); err != nil {
		return store.Project{}, err
	}
	p, err := s.store.GetProject(ctx, id)
	if err != nil {
		return store.Project{}, err
	}
	if err := s.authorize(ctx, p.OrganizationID, a, need, store.ErrProjectNotFound); err != nil {
		return store.Project{}, err
	}
	return p, nil
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func organizationPB(o store.Organization) *svcv1.Organization {
	return &svcv1.Organization{
		Id: o.ID, Name: o.Name, DisplayName: o.DisplayName, BillingEmail: o.BillingEmail, Plan: o.Plan,
		ProjectCount: o.ProjectCount, MemberCount: o.MemberCount, CreatedAt: ts(o.CreatedAt),
	}
}

func projectPB(p store.Project) *svcv1.Project {
	return &svcv1.Project{
		Id: p.ID, OrganizationId: p.OrganizationID, Name: p.Name, Description: p.Description,
		EnvironmentCount: p.EnvironmentCount, BlueprintCount: p.BlueprintCount, CreatedAt: ts(p.CreatedAt),
	}
}

func memberPB(m store.Member) *svcv1.Member {
	return &svcv1.Member{
		UserId: m.UserID, Email: m.Email, Name: m.Name, Role: m.Role, Status: m.Status,
		JoinedAt: ts(m.JoinedAt), LastActiveAt: ts(m.LastActiveAt),
	}
}

func invitationPB(i store.Invitation) *svcv1.Invitation {
	return &svcv1.Invitation{
		Id: i.ID, Email: i.Email, Role: i.Role, Status: i.Status,
		ExpiresAt: ts(i.ExpiresAt), InvitedAt: ts(i.InvitedAt),
	}
}
