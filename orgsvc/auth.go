package orgsvc

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/orgsvc/store"
)

// Authenticator verifies the caller of a request. *identity.Verifier is one.
type Authenticator interface {
	Authenticate(ctx context.Context, h http.Header) (identity.Principal, error)
	// Ready reports whether tokens can be verified without waiting for
	// the identity provider (its discovery and keys are in).
	Ready(ctx context.Context) error
}

type principalKey struct{}

func principalFrom(ctx context.Context) *identity.Principal {
	p, _ := ctx.Value(principalKey{}).(*identity.Principal)
	return p
}

// interceptor authenticates every call, admits pending invitations of a
// person, and converts every handler error into an API error.
type interceptor struct{ s *Service }

func domainOf(procedure string) string {
	// "/svc.v1.OrganizationService/GetOrganization" -> "svc.v1.OrganizationService"
	p := strings.TrimPrefix(procedure, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.s.authenticate(ctx, req.Header())
		if err == nil {
			var res connect.AnyResponse
			res, err = next(ctx, req)
			if err == nil {
				return res, nil
			}
		}
		return nil, toConnectError(ctx, i.s.log, req.Peer(), domainOf(req.Spec().Procedure), err)
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.s.authenticate(ctx, conn.RequestHeader())
		if err == nil {
			if err = next(ctx, conn); err == nil {
				return nil
			}
		}
		return toConnectError(ctx, i.s.log, conn.Peer(), domainOf(conn.Spec().Procedure), err)
	}
}

func (s *Service) authenticate(ctx context.Context, h http.Header) (context.Context, error) {
	p, err := s.auth.Authenticate(ctx, h)
	if err != nil {
		return ctx, err
	}
	if !p.ServiceAccount() {
		if err := s.welcome(ctx, &p); err != nil {
			return ctx, err
		}
	}
	return context.WithValue(ctx, principalKey{}, &p), nil
}

// welcome turns a person's pending invitations into memberships (on every
// call, so an invitation takes effect on the invitee's very next call) and
// records activity (at most once a minute per person and process).
func (s *Service) welcome(ctx context.Context, p *identity.Principal) error {
	now := s.now()
	if p.Email != "" {
		if _, err := s.store.AcceptInvitations(ctx, store.Person{UserID: p.Subject, Email: p.Email, Name: p.DisplayName()}, now); err != nil {
			return err
		}
	}
	if s.activity.due(p.Subject, now) {
		return s.store.TouchMember(ctx, p.Subject, now)
	}
	return nil
}

// activity remembers when each person's last_active_at was last written.
type activity struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const (
	activityEvery   = time.Minute
	activityEntries = 100_000 // bound on remembered persons; the map is reset past it
)

func (a *activity) due(sub string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.last[sub]; ok && now.Sub(t) < activityEvery {
		return false
	}
	if a.last == nil || len(a.last) >= activityEntries {
		a.last = make(map[string]time.Time)
	}
	a.last[sub] = now
	return true
}

// access classes: what a service account needs for an operation.
type access int

const (
	accessRead  access = iota // Get, List, Watch, Search: every svc-* role
	accessEnv                 // environment and blueprint changes: svc-admin, svc-env-manager
	accessAdmin               // organization service changes: svc-admin
)

func (a access) roles() []string {
	switch a {
	case accessRead:
		return []string{"svc-admin", "svc-env-manager", "svc-viewer"}
	case accessEnv:
		return []string{"svc-admin", "svc-env-manager"}
	default:
		return []string{"svc-admin"}
	}
}

// allowServiceAccount checks a service account's installation-wide roles.
// For a person it returns false, nil: the organization decides.
func allowServiceAccount(p *identity.Principal, a access) (bool, error) {
	if !p.ServiceAccount() {
		return false, nil
	}
	roles := a.roles()
	for _, r := range roles {
		if p.HasRole(r) {
			return true, nil
		}
	}
	e := errorf(connect.CodePermissionDenied, reasonMissingRole, "this operation needs one of the roles %s", strings.Join(roles, ", "))
	e.meta = map[string]string{"required_roles": strings.Join(roles, ",")}
	return false, e
}

// orgRole is what a person needs in an organization.
type orgRole int

const (
	asMember orgRole = iota // admin or member
	asAdmin
)

// authorize lets the caller act on organization orgID. A service account is
// judged by its roles; a person by membership. A person who is not a member
// gets notFound, exactly as for a missing organization, so that membership
// does not leak which identifiers exist.
func (s *Service) authorize(ctx context.Context, orgID string, a access, need orgRole, notFound error) error {
	p := principalFrom(ctx)
	if ok, err := allowServiceAccount(p, a); ok || err != nil {
		return err
	}
	m, err := s.store.GetMember(ctx, orgID, p.Subject)
	if errors.Is(err, store.ErrMemberNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	if m.Status != store.MemberActive {
		return errorf(connect.CodePermissionDenied, reasonMemberSuspended, "your membership of this organization is %s", m.Status)
	}
	if need == asAdmin && m.Role != store.RoleAdmin {
		e := errorf(connect.CodePermissionDenied, reasonAdminRequired, "this operation needs the admin role in the organization")
		e.meta = map[string]string{"required_role": store.RoleAdmin}
		return e
	}
	return nil
}
