// Package store keeps the backend's organizations, projects, members,
// invitations and environments in SQL: SQLite (embedded, the default) or
// PostgreSQL. Every operation that changes more than one row runs in one
// transaction, so the counters on organizations and projects are always exact.
//
// The package knows nothing of callers, roles or protocols: the service layer
// authorizes and validates, and maps the errors below to API errors.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors returned by Store. Callers match them with errors.Is.
var (
	ErrOrganizationNotFound    = errors.New("organization not found")
	ErrOrganizationNameTaken   = errors.New("organization name already taken")
	ErrOrganizationHasProjects = errors.New("organization has projects")
	ErrProjectNotFound         = errors.New("project not found")
	ErrProjectNameTaken        = errors.New("project name already taken in this organization")
	ErrProjectHasEnvironments  = errors.New("project has environments")
	ErrMemberNotFound          = errors.New("member not found")
	ErrAlreadyMember           = errors.New("already a member of the organization")
	ErrLastAdmin               = errors.New("the organization's last admin")
	ErrEnvironmentNotFound     = errors.New("environment not found")
	ErrEnvironmentNameTaken    = errors.New("environment name already taken in this project")
	ErrInvalidPageToken        = errors.New("invalid page token")
)

// Roles and statuses as stored.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"

	MemberActive    = "active"
	MemberSuspended = "suspended"

	InvitationPending = "pending"

	EnvironmentProvisioning = "PROVISIONING"
	EnvironmentDeleted      = "DELETED"
)

// Organization is a stored organization.
type Organization struct {
	ID           string
	Name         string
	DisplayName  string
	BillingEmail string
	Plan         string
	ProjectCount int32
	MemberCount  int32
	CreatedAt    time.Time
}

// OrganizationSummary is an organization with the role of the member it was
// listed for.
type OrganizationSummary struct {
	Organization
	Role string
}

// Project is a stored project.
type Project struct {
	ID               string
	OrganizationID   string
	Name             string
	Description      string
	EnvironmentCount int32
	BlueprintCount   int32
	CreatedAt        time.Time
}

// Member is a person's membership of an organization.
type Member struct {
	OrganizationID string
	UserID         string
	Email          string
	Name           string
	Role           string
	Status         string
	JoinedAt       time.Time
	LastActiveAt   time.Time
}

// MemberUpdate is a change to a membership; an empty field is unchanged.
type MemberUpdate struct {
	Role   string // RoleAdmin or RoleMember
	Status string // MemberActive or MemberSuspended
}

// Invitation is a pending invitation.
type Invitation struct {
	ID             string
	OrganizationID string
	Email          string
	Role           string
	Status         string
	InvitedAt      time.Time
	ExpiresAt      time.Time
}

// Environment is a live environment, or (returned by a delete) one that just
// ended. The stored status is PROVISIONING until deleted; the service derives
// RUNNING from ReadyAt.
type Environment struct {
	ID             string
	ProjectID      string
	OrganizationID string
	Name           string
	BlueprintID    string
	Status         string
	CreatedAt      time.Time
	ReadyAt        time.Time
	DeletedAt      time.Time // zero unless Status is DELETED
	// CreatedBy is the subject that created the environment (the verified
	// token's sub), by which the edge counts environment quotas; empty for
	// environments created before it was recorded.
	CreatedBy string
}

// Person identifies a caller who is a person, for accepting invitations.
type Person struct {
	UserID string
	Email  string // verified e-mail address; empty if none
	Name   string
}

// Page asks for one page of a list. Size is already defaulted and bounded by
// the caller (1..1000). Token is the next-page token of the previous page, or
// empty for the first.
type Page struct {
	Size  int
	Token string
}

// EnvironmentFilter narrows ListEnvironments.
type EnvironmentFilter struct {
	ProjectID string // only this project's, when set
	// MemberOf, when set, keeps only environments of organizations this user
	// is an active member of (a suspended membership gives no access). Empty
	// means every environment (service accounts).
	MemberOf string
}

// Store is the backend's storage. Implementations are safe for concurrent use.
// Identifiers are assigned by the store (time-ordered, prefixed: org_, prj_,
// inv_, env_) when the given ID is empty. Timestamps are taken from the
// arguments, never from the clock, so that tests control time.
// Lists are ordered by ID (hence by creation time).
type Store interface {
	// CreateOrganization inserts org and, if admin.UserID is set, admin as its
	// first member with role admin (member_count 1).
	CreateOrganization(ctx context.Context, org Organization, admin *Member) (Organization, error)
	GetOrganization(ctx context.Context, id string) (Organization, error)
	// ListOrganizations lists the organizations userID is an active member
	// of, with its role; with userID empty, every organization, with an empty
	// role. A suspended membership is not listed: it gives no access.
	ListOrganizations(ctx context.Context, userID string, page Page) ([]OrganizationSummary, string, error)
	// UpdateOrganization changes the non-nil fields.
	UpdateOrganization(ctx context.Context, id string, displayName, billingEmail *string) (Organization, error)
	// DeleteOrganization deletes the organization, its members and invitations.
	// With projects present it fails with ErrOrganizationHasProjects unless
	// force, which deletes them and their environments too; the environments
	// so ended are returned (Status DELETED, DeletedAt now).
	DeleteOrganization(ctx context.Context, id string, force bool, now time.Time) ([]Environment, error)

	CreateProject(ctx context.Context, p Project) (Project, error)
	GetProject(ctx context.Context, id string) (Project, error)
	ListProjects(ctx context.Context, orgID string, page Page) ([]Project, string, error)
	UpdateProject(ctx context.Context, id string, name, description *string) (Project, error)
	// DeleteProject is DeleteOrganization's counterpart for a project and its
	// environments (ErrProjectHasEnvironments unless force).
	DeleteProject(ctx context.Context, id string, force bool, now time.Time) ([]Environment, error)

	GetMember(ctx context.Context, orgID, userID string) (Member, error)
	ListMembers(ctx context.Context, orgID string, page Page) ([]Member, string, error)
	// ListInvitations returns up to limit pending invitations that have not
	// expired at now, oldest first.
	ListInvitations(ctx context.Context, orgID string, now time.Time, limit int) ([]Invitation, error)
	// Invite records a pending invitation. If the e-mail address (compared
	// case-insensitively) is already a member's: ErrAlreadyMember. If a pending
	// invitation for it exists, it is renewed (role, InvitedAt, ExpiresAt) and
	// keeps its ID.
	Invite(ctx context.Context, inv Invitation) (Invitation, error)
	// UpdateMember changes a member's role and status (the non-empty fields
	// of u). A change that leaves the organization without an active admin
	// (demoting or suspending its last active admin) fails with
	// ErrLastAdmin; suspended admins do not count.
	UpdateMember(ctx context.Context, orgID, userID string, u MemberUpdate) (Member, error)
	// RemoveMember removes a member; removing the last active admin fails
	// with ErrLastAdmin.
	RemoveMember(ctx context.Context, orgID, userID string) error
	// AcceptInvitations turns every pending, unexpired invitation addressed to
	// p.Email into a membership of p (unless p is already a member) and
	// deletes it. It returns how many memberships it created.
	AcceptInvitations(ctx context.Context, p Person, now time.Time) (int, error)
	// TouchMember sets last_active_at of every active membership of userID.
	TouchMember(ctx context.Context, userID string, now time.Time) error

	// CreateEnvironment inserts a live environment in an existing project
	// (ErrProjectNotFound otherwise), and maintains the project's
	// environment_count and blueprint_count (distinct blueprints among its
	// live environments).
	CreateEnvironment(ctx context.Context, e Environment) (Environment, error)
	GetEnvironment(ctx context.Context, id string) (Environment, error)
	ListEnvironments(ctx context.Context, f EnvironmentFilter, page Page) ([]Environment, string, error)
	// DeleteEnvironment ends a live environment and returns it as ended.
	DeleteEnvironment(ctx context.Context, id string, now time.Time) (Environment, error)
	// ExistingEnvironments returns which of ids are live environments, in
	// no particular order (at most MaxExistingIDs ids).
	ExistingEnvironments(ctx context.Context, ids []string) ([]string, error)
	// EnvironmentsByCreator lists live environments whose CreatedBy is
	// creator, in order of id; with creator empty, every live environment
	// that has a creator, in order of creator, then id.
	EnvironmentsByCreator(ctx context.Context, creator string, page Page) ([]Environment, string, error)

	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	Close() error
}
