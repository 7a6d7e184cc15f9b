package orgsvc

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/orgsvc/store"
)

// Storage systems, as OpenTelemetry's db.system names them.
const (
	DBSystemSQLite     = "sqlite"
	DBSystemPostgreSQL = "postgresql"
)

// DBSystem names the storage system a DSN opens, the way store.Open reads
// it: postgres:// and postgresql:// URLs are PostgreSQL, the rest SQLite.
func DBSystem(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return DBSystemPostgreSQL
	}
	return DBSystemSQLite
}

// tracedStore is a store.Store that puts each call in a span named
// store.<Method> (a child of the handler's span) and times it in
// orgsvc_storage_duration_seconds. Span attributes name the system and the
// operation, never a query's arguments.
type tracedStore struct {
	next    store.Store
	tracer  trace.Tracer
	system  attribute.KeyValue
	metrics *Metrics
}

var _ store.Store = (*tracedStore)(nil)

func newTracedStore(next store.Store, tp trace.TracerProvider, system string, m *Metrics) *tracedStore {
	if system == "" {
		system = "other_sql"
	}
	return &tracedStore{
		next:    next,
		tracer:  tp.Tracer("github.com/orgedge/edge/orgsvc"),
		system:  attribute.String("db.system", system),
		metrics: m,
	}
}

// start begins one storage call; the returned function ends it with the
// call's error.
func (s *tracedStore) start(ctx context.Context, op string) (context.Context, func(error)) {
	begin := time.Now()
	ctx, span := s.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(s.system, attribute.String("db.operation.name", op)))
	return ctx, func(err error) {
		s.metrics.stored(op, time.Since(begin))
		if err != nil && !expected(err) && span.IsRecording() {
			span.RecordError(err)
			span.SetStatus(codes.Error, "storage failed")
		}
		span.End()
	}
}

// expected reports whether err is an answer of the store (not found, name
// taken, …) rather than a failure of it.
func expected(err error) bool {
	for _, m := range storeErrors {
		if errors.Is(err, m.err) {
			return true
		}
	}
	return errors.Is(err, context.Canceled)
}

func (s *tracedStore) CreateOrganization(ctx context.Context, org store.Organization, admin *store.Member) (_ store.Organization, err error) {
	ctx, end := s.start(ctx, "CreateOrganization")
	defer func() { end(err) }()
	return s.next.CreateOrganization(ctx, org, admin)
}

func (s *tracedStore) GetOrganization(ctx context.Context, id string) (_ store.Organization, err error) {
	ctx, end := s.start(ctx, "GetOrganization")
	defer func() { end(err) }()
	return s.next.GetOrganization(ctx, id)
}

func (s *tracedStore) ListOrganizations(ctx context.Context, userID string, page store.Page) (_ []store.OrganizationSummary, _ string, err error) {
	ctx, end := s.start(ctx, "ListOrganizations")
	defer func() { end(err) }()
	return s.next.ListOrganizations(ctx, userID, page)
}

func (s *tracedStore) UpdateOrganization(ctx context.Context, id string, displayName, billingEmail *string) (_ store.Organization, err error) {
	ctx, end := s.start(ctx, "UpdateOrganization")
	defer func() { end(err) }()
	return s.next.UpdateOrganization(ctx, id, displayName, billingEmail)
}

func (s *tracedStore) DeleteOrganization(ctx context.Context, id string, force bool, now time.Time) (_ []store.Environment, err error) {
	ctx, end := s.start(ctx, "DeleteOrganization")
	defer func() { end(err) }()
	return s.next.DeleteOrganization(ctx, id, force, now)
}

func (s *tracedStore) CreateProject(ctx context.Context, p store.Project) (_ store.Project, err error) {
	ctx, end := s.start(ctx, "CreateProject")
	defer func() { end(err) }()
	return s.next.CreateProject(ctx, p)
}

func (s *tracedStore) GetProject(ctx context.Context, id string) (_ store.Project, err error) {
	ctx, end := s.start(ctx, "GetProject")
	defer func() { end(err) }()
	return s.next.GetProject(ctx, id)
}

func (s *tracedStore) ListProjects(ctx context.Context, orgID string, page store.Page) (_ []store.Project, _ string, err error) {
	ctx, end := s.start(ctx, "ListProjects")
	defer func() { end(err) }()
	return s.next.ListProjects(ctx, orgID, page)
}

func (s *tracedStore) UpdateProject(ctx context.Context, id string, name, description *string) (_ store.Project, err error) {
	ctx, end := s.start(ctx, "UpdateProject")
	defer func() { end(err) }()
	return s.next.UpdateProject(ctx, id, name, description)
}

func (s *tracedStore) DeleteProject(ctx context.Context, id string, force bool, now time.Time) (_ []store.Environment, err error) {
	ctx, end := s.start(ctx, "DeleteProject")
	defer func() { end(err) }()
	return s.next.DeleteProject(ctx, id, force, now)
}

func (s *tracedStore) GetMember(ctx context.Context, orgID, userID string) (_ store.Member, err error) {
	ctx, end := s.start(ctx, "GetMember")
	defer func() { end(err) }()
	return s.next.GetMember(ctx, orgID, userID)
}

func (s *tracedStore) ListMembers(ctx context.Context, orgID string, page store.Page) (_ []store.Member, _ string, err error) {
	ctx, end := s.start(ctx, "ListMembers")
	defer func() { end(err) }()
	return s.next.ListMembers(ctx, orgID, page)
}

func (s *tracedStore) ListInvitations(ctx context.Context, orgID string, now time.Time, limit int) (_ []store.Invitation, err error) {
	ctx, end := s.start(ctx, "ListInvitations")
	defer func() { end(err) }()
	return s.next.ListInvitations(ctx, orgID, now, limit)
}

func (s *tracedStore) Invite(ctx context.Context, inv store.Invitation) (_ store.Invitation, err error) {
	ctx, end := s.start(ctx, "Invite")
	defer func() { end(err) }()
	return s.next.Invite(ctx, inv)
}

func (s *tracedStore) UpdateMember(ctx context.Context, orgID, userID string, u store.MemberUpdate) (_ store.Member, err error) {
	ctx, end := s.start(ctx, "UpdateMember")
	defer func() { end(err) }()
	return s.next.UpdateMember(ctx, orgID, userID, u)
}

func (s *tracedStore) RemoveMember(ctx context.Context, orgID, userID string) (err error) {
	ctx, end := s.start(ctx, "RemoveMember")
	defer func() { end(err) }()
	return s.next.RemoveMember(ctx, orgID, userID)
}

func (s *tracedStore) AcceptInvitations(ctx context.Context, p store.Person, now time.Time) (_ int, err error) {
	ctx, end := s.start(ctx, "AcceptInvitations")
	defer func() { end(err) }()
	return s.next.AcceptInvitations(ctx, p, now)
}

func (s *tracedStore) TouchMember(ctx context.Context, userID string, now time.Time) (err error) {
	ctx, end := s.start(ctx, "TouchMember")
	defer func() { end(err) }()
	return s.next.TouchMember(ctx, userID, now)
}

func (s *tracedStore) CreateEnvironment(ctx context.Context, e store.Environment) (_ store.Environment, err error) {
	ctx, end := s.start(ctx, "CreateEnvironment")
	defer func() { end(err) }()
	return s.next.CreateEnvironment(ctx, e)
}

func (s *tracedStore) GetEnvironment(ctx context.Context, id string) (_ store.Environment, err error) {
	ctx, end := s.start(ctx, "GetEnvironment")
	defer func() { end(err) }()
	return s.next.GetEnvironment(ctx, id)
}

func (s *tracedStore) ListEnvironments(ctx context.Context, f store.EnvironmentFilter, page store.Page) (_ []store.Environment, _ string, err error) {
	ctx, end := s.start(ctx, "ListEnvironments")
	defer func() { end(err) }()
	return s.next.ListEnvironments(ctx, f, page)
}

func (s *tracedStore) DeleteEnvironment(ctx context.Context, id string, now time.Time) (_ store.Environment, err error) {
	ctx, end := s.start(ctx, "DeleteEnvironment")
	defer func() { end(err) }()
	return s.next.DeleteEnvironment(ctx, id, now)
}

func (s *tracedStore) ExistingEnvironments(ctx context.Context, ids []string) (_ []string, err error) {
	ctx, end := s.start(ctx, "ExistingEnvironments")
	defer func() { end(err) }()
	return s.next.ExistingEnvironments(ctx, ids)
}

func (s *tracedStore) EnvironmentsByCreator(ctx context.Context, creator string, page store.Page) (_ []store.Environment, _ string, err error) {
	ctx, end := s.start(ctx, "EnvironmentsByCreator")
	defer func() { end(err) }()
	return s.next.EnvironmentsByCreator(ctx, creator, page)
}

// Ping is timed always, traced only inside a traced call: readiness probes
// would otherwise start a trace of their own every few seconds.
func (s *tracedStore) Ping(ctx context.Context) error {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		begin := time.Now()
		err := s.next.Ping(ctx)
		s.metrics.stored("Ping", time.Since(begin))
		return err
	}
	ctx, end := s.start(ctx, "Ping")
	err := s.next.Ping(ctx)
	end(err)
	return err
}

func (s *tracedStore) Close() error { return s.next.Close() }
