package orgsvc

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/orgsvc/store"
)

// Environment statuses as the API shows them. RUNNING is derived: an
// environment is RUNNING once its ready time has passed.
const (
	statusProvisioning = store.EnvironmentProvisioning
	statusRunning      = "RUNNING"
	statusDeleted      = store.EnvironmentDeleted
)

// environments implements svcv1connect.EnvironmentServiceHandler.
type environments struct{ *Service }

func (s environments) CreateEnvironment(ctx context.Context, req *connect.Request[svcv1.CreateEnvironmentRequest]) (*connect.Response[svcv1.CreateEnvironmentResponse], error) {
	m := req.Msg
	var v fieldViolations
	v.name("name", m.Name)
	v.id("blueprint_id", m.BlueprintId)
	v.id("project_id", m.ProjectId)
	if err := v.err(); err != nil {
		return nil, err
	}
	p, err := s.project(ctx, m.ProjectId, accessEnv, asMember)
	if err != nil {
		return nil, err
	}
	if _, ok := s.catalog.Lookup(m.BlueprintId); !ok {
		return nil, errorf(connect.CodeNotFound, reasonBlueprintMissing, "blueprint %q is not in the catalog", m.BlueprintId)
	}
	now := s.now()
	e, err := s.store.CreateEnvironment(ctx, store.Environment{
		ProjectID: p.ID, OrganizationID: p.OrganizationID, Name: m.Name, BlueprintID: m.BlueprintId,
		Status: statusProvisioning, CreatedAt: now, ReadyAt: now.Add(s.provisionDelay),
		// The edge counts environment quotas by the same verified subject.
		CreatedBy: principalFrom(ctx).Subject,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&svcv1.CreateEnvironmentResponse{Environment: s.environmentPB(e)}), nil
}

func (s environments) ListEnvironments(ctx context.Context, req *connect.Request[svcv1.ListEnvironmentsRequest]) (*connect.Response[svcv1.ListEnvironmentsResponse], error) {
	m := req.Msg
	var v fieldViolations
	page := v.page(m.PageSize, m.PageToken)
	if err := v.err(); err != nil {
		return nil, err
	}
	p := principalFrom(ctx)
	f := store.EnvironmentFilter{ProjectID: m.ProjectId, MemberOf: p.Subject}
	if ok, err := allowServiceAccount(p, accessRead); err != nil {
		return nil, err
	} else if ok {
		f.MemberOf = ""
	}
	es, next, err := s.store.ListEnvironments(ctx, f, page)
	if err != nil {
		return nil, err
	}
	res := &svcv1.ListEnvironmentsResponse{NextPageToken: next, Environments: make([]*svcv1.Environment, len(es))}
	for i, e := range es {
		res.Environments[i] = s.environmentPB(e)
	}
	return connect.NewResponse(res), nil
}

func (s environments) GetEnvironment(ctx context.Context, req *connect.Request[svcv1.GetEnvironmentRequest]) (*connect.Response[svcv1.GetEnvironmentResponse], error) {
	e, err := s.environment(ctx, req.Msg.EnvironmentId, accessRead)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&svcv1.GetEnvironmentResponse{Environment: s.environmentPB(e)}), nil
}

func (s environments) DeleteEnvironment(ctx context.Context, req *connect.Request[svcv1.DeleteEnvironmentRequest]) (*connect.Response[svcv1.DeleteEnvironmentResponse], error) {
	if _, err := s.environment(ctx, req.Msg.EnvironmentId, accessEnv); err != nil {
		return nil, err
	}
	e, err := s.store.DeleteEnvironment(ctx, req.Msg.EnvironmentId, s.now())
	if err != nil {
		return nil, err
	}
	s.watchers.ended([]store.Environment{e})
	return connect.NewResponse(&svcv1.DeleteEnvironmentResponse{Environment: s.environmentPB(e)}), nil
}

// WatchEnvironment sends the current state, then each change: RUNNING when
// provisioning ends, DELETED (the last message) when the environment ends.
// Deletions in this process arrive at once; storage is re-read every
// WatchPoll to see deletions made by other replicas. Every WatchAccessCheck
// the caller's access is checked again, so that a stream does not outlive
// the membership that opened it: it ends with permission_denied.
func (s environments) WatchEnvironment(ctx context.Context, req *connect.Request[svcv1.WatchEnvironmentRequest], stream *connect.ServerStream[svcv1.WatchEnvironmentResponse]) error {
	id := req.Msg.EnvironmentId
	ended, unsubscribe := s.watchers.subscribe(id)
	defer unsubscribe()
	e, err := s.environment(ctx, id, accessRead)
	if err != nil {
		return err
	}
	// send sends e and returns the status it said.
	send := func(e store.Environment) (string, error) {
		pb := s.environmentPB(e)
		return pb.Status, stream.Send(&svcv1.WatchEnvironmentResponse{Status: pb.Status, Environment: pb})
	}
	first, err := send(e)
	if err != nil {
		return err
	}
	// reread refreshes e from storage; done when the environment ended and
	// its last message is sent.
	reread := func() (done bool, err error) {
		cur, err := s.store.GetEnvironment(ctx, id)
		if errors.Is(err, store.ErrEnvironmentNotFound) {
			e.Status, e.DeletedAt = statusDeleted, s.now()
			_, err := send(e)
			return true, err
		}
		if err != nil {
			return false, err
		}
		e = cur
		return false, nil
	}
	poll := time.NewTicker(s.watchPoll)
	defer poll.Stop()
	recheck := time.NewTicker(s.watchAccess)
	defer recheck.Stop()
	// What the first message said decides whether RUNNING is to follow, not
	// the clock read again: provisioning may have ended while it was sent.
	var ready <-chan time.Time
	if first == statusProvisioning {
		t := time.NewTimer(e.ReadyAt.Sub(s.now())) // past: at once
		defer t.Stop()
		ready = t.C
	}
	for {
		select {
		case <-ctx.Done():
			// Past its deadline the stream ends deadline_exceeded (connect
			// maps the context's error), not as a watch that finished: a
			// watcher that reopens on deadline must not take it as the
			// end. A client that left reads nothing.
			return ctx.Err()
		case <-ready:
			ready = nil
			// The timer, not the wall clock, decides: a clock step must not
			// make the stream say PROVISIONING twice.
			if now := s.now(); now.Before(e.ReadyAt) {
				e.ReadyAt = now
			}
			if _, err := send(e); err != nil {
				return err
			}
		case gone := <-ended:
			_, err := send(gone)
			return err
		case <-poll.C:
			if done, err := reread(); done || err != nil {
				return err
			}
		case <-recheck.C:
			// The environment first: one that ended (with its organization,
			// say) gets its last DELETED message, as every watcher does.
			if done, err := reread(); done || err != nil {
				return err
			}
			if err := s.stillAllowed(ctx, e); err != nil {
				// The organization may have gone between the two reads: its
				// end, not the lost access, is what the watcher is told.
				if done, rerr := reread(); done || rerr != nil {
					return rerr
				}
				return err
			}
		}
	}
}

// stillAllowed checks again, for an open WatchEnvironment stream, that the
// caller may read the live environment e. A caller who is no longer a member
// (removed) gets permission_denied ACCESS_REVOKED rather than the not_found
// a stranger would: they knew the environment when the stream opened, so
// nothing leaks, and the code says what changed. A suspended member gets
// MEMBER_SUSPENDED, as on every call.
func (s *Service) stillAllowed(ctx context.Context, e store.Environment) error {
	err := s.authorize(ctx, e.OrganizationID, accessRead, asMember, store.ErrEnvironmentNotFound)
	if errors.Is(err, store.ErrEnvironmentNotFound) || errors.Is(err, store.ErrOrganizationNotFound) {
		return errorf(connect.CodePermissionDenied, reasonAccessRevoked,
			"you no longer have access to this environment's organization")
	}
	return err
}

// environment validates an id, loads the environment and authorizes the
// caller on its organization.
func (s *Service) environment(ctx context.Context, id string, a access) (store.Environment, error) {
	var v fieldViolations
	v.id("environment_id", id)
	if err := v.err(); err != nil {
		return store.Environment{}, err
	}
	e, err := s.store.GetEnvironment(ctx, id)
	if err != nil {
		return store.Environment{}, err
	}
	if err := s.authorize(ctx, e.OrganizationID, a, asMember, store.ErrEnvironmentNotFound); err != nil {
		return store.Environment{}, err
	}
	return e, nil
}

func (s *Service) status(e store.Environment) string {
	if e.Status == statusProvisioning && !s.now().Before(e.ReadyAt) {
		return statusRunning
	}
	return e.Status
}

func (s *Service) environmentPB(e store.Environment) *svcv1.Environment {
	return &svcv1.Environment{
		Id: e.ID, Name: e.Name, Status: s.status(e), CreatedAt: ts(e.CreatedAt),
		ProjectId: e.ProjectID, BlueprintId: e.BlueprintID, DeletedAt: ts(e.DeletedAt),
	}
}

// hub tells the watchers of an environment in this process that it ended.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan store.Environment]struct{}
}

func newHub() *hub { return &hub{subs: make(map[string]map[chan store.Environment]struct{})} }

func (h *hub) subscribe(id string) (<-chan store.Environment, func()) {
	ch := make(chan store.Environment, 1)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = make(map[chan store.Environment]struct{})
	}
	h.subs[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}

func (h *hub) ended(es []store.Environment) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range es {
		for ch := range h.subs[e.ID] {
			select {
			case ch <- e:
			default: // already told
			}
		}
	}
}
