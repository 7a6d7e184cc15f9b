package edge_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/reconcile"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// fuzzQuota is the concurrent-environment quota of the fuzzed subjects.
const fuzzQuota = 3

// quotaWorld is a real edge and backend and a few subjects, shared by the
// inputs of one fuzz process: each input goes on from where the last left,
// and every check compares with the backend's truth, not a model.
type quotaWorld struct {
	edge       *testkit.Edge
	reconciler *reconcile.Reconciler
	subjects   []*fuzzSubject
	names      int
}

type fuzzSubject struct {
	token        string
	org, project string
	direct       testkit.Clients // at the backend, around the edge
	usage        testkit.Clients // GetUsage through the edge
}

func startQuotaWorld(f *testing.F) *quotaWorld {
	iss := testkit.SharedIssuer(f)
	be := testkit.StartBackend(f, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(f, be.URL, iss.URL())
	cfg.Upstream.AdminURL = be.AdminURL
	cfg.Limits.ReconcileInterval = time.Hour // the fuzz reconciles when it goes around the edge
	ent := cfg.Limits.Plans["enterprise"]
	ent.RequestsPerMinute, ent.Burst = 1_000_000, 1_000_000
	ent.Quotas = config.Quotas{ConcurrentEnvironments: fuzzQuota}
	cfg.Limits.Plans["enterprise"] = ent
	for i, op := range cfg.Operations {
		if op.RatePerMinute > 0 {
			cfg.Operations[i].RatePerMinute = 1_000_000
		}
	}
	w := &quotaWorld{edge: testkit.StartEdge(f, cfg)}
	w.reconciler = reconciler(f, w.edge)
	for i := range 3 {
		tok := testkit.Token(f, iss.URL(), fmt.Sprintf("enterprise-fuzz%d", i))
		s := &fuzzSubject{token: tok, direct: testkit.NewClients(be.URL, testkit.ConnectProto, tok),
			usage: testkit.NewClients(w.edge.URL, testkit.ConnectProto, tok)}
		w.subjects = append(w.subjects, s)
	}
	return w
}

// clients of subject s through the edge in protocol p, gzip-compressed or not.
func (w *quotaWorld) clients(s *fuzzSubject, p testkit.Protocol, gzip bool) testkit.Clients {
	return quotaClients(w.edge.URL, p, s.token, gzip)
}

func (w *quotaWorld) name() string {
	w.names++
	return fmt.Sprintf("n%d", w.names)
}

// ensureProject gives s an organization and a project (anew after a forced
// delete ended them).
func (w *quotaWorld) ensureProject(ctx context.Context, s *fuzzSubject) error {
	if s.org == "" {
		org, err := s.direct.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: w.name(), BillingEmail: "a@b.example"}))
		if err != nil {
			return err
		}
		s.org = org.Msg.Id
	}
	if s.project == "" {
		prj, err := s.direct.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: s.org, Name: w.name()}))
		if err != nil {
			return err
		}
		s.project = prj.Msg.Id
	}
	return nil
}

// truth is the subject's live environments, as the backend has them.
func (s *fuzzSubject) truth(ctx context.Context) ([]string, error) {
	res, err := s.direct.Env.ListEnvironments(ctx, req(&svcv1.ListEnvironmentsRequest{PageSize: 1000}))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range res.Msg.Environments {
		ids = append(ids, e.Id)
	}
	return ids, nil
}

// check compares, for every subject, the running environments the edge
// counts with the backend's truth.
func (w *quotaWorld) check(t *testing.T, ctx context.Context, step string) {
	t.Helper()
	for i, s := range w.subjects {
		ids, err := s.truth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.usage.Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if got := int(u.Msg.ResourceUsage.Environments); got != len(ids) {
			t.Fatalf("after %s: the edge counts %d running environments for subject %d, the backend has %d", step, got, i, len(ids))
		}
	}
}

var fuzzProtocols = []testkit.Protocol{testkit.GRPC, testkit.GRPCWeb, testkit.ConnectProto, testkit.ConnectJSON, testkit.HTTPJSON}

// step runs one operation chosen by op and arg and checks its outcome. op%6
// is the operation (0-1 create, 2-3 delete, 4 forced delete, 5 delete at
// the backend then reconcile); op>>3 picks the environment. arg%3 is the
// subject, (arg>>2)%5 the protocol (fuzzProtocols), arg&0x80 gzip.
func (w *quotaWorld) step(t *testing.T, ctx context.Context, op, arg byte) string {
	t.Helper()
	s := w.subjects[int(arg)%len(w.subjects)]
	p := fuzzProtocols[int(arg>>2)%len(fuzzProtocols)]
	gzip := arg&0x80 != 0
	c := w.clients(s, p, gzip)
	if err := w.ensureProject(ctx, s); err != nil {
		t.Fatal(err)
	}
	live, err := s.truth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pick := func() string { return live[int(op>>3)%len(live)] }
	switch op % 6 {
	case 0, 1:
		_, err := createEnv(ctx, c, s.project, w.name())
		if len(live) < fuzzQuota && err != nil {
			t.Fatalf("create (%s, gzip %v) with %d running: %v", p, gzip, len(live), err)
		}
		if len(live) >= fuzzQuota {
			wantError(t, err, connect.CodeResourceExhausted, "ENVIRONMENT_QUOTA_EXCEEDED", "edge")
		}
		return fmt.Sprintf("create over %s (gzip %v)", p, gzip)
	case 2, 3:
		if len(live) == 0 {
			return "nothing"
		}
		if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: pick()})); err != nil {
			t.Fatalf("delete over %s: %v", p, err)
		}
		return fmt.Sprintf("delete over %s (gzip %v)", p, gzip)
	case 4: // 0x04: forced DeleteProject; 0x40: forced DeleteOrganization
		if op&0x40 != 0 {
			if _, err := c.Org.DeleteOrganization(ctx, req(&svcv1.DeleteOrganizationRequest{OrganizationId: s.org, Force: true})); err != nil {
				t.Fatalf("forced DeleteOrganization over %s: %v", p, err)
			}
			s.org, s.project = "", ""
			return fmt.Sprintf("forced DeleteOrganization over %s (gzip %v)", p, gzip)
		}
		if _, err := c.Org.DeleteProject(ctx, req(&svcv1.DeleteProjectRequest{ProjectId: s.project, Force: true})); err != nil {
			t.Fatalf("forced DeleteProject over %s: %v", p, err)
		}
		s.project = ""
		return fmt.Sprintf("forced DeleteProject over %s (gzip %v)", p, gzip)
	default:
		if len(live) == 0 {
			return "nothing"
		}
		// Around the edge: the backend deletes, the edge learns it by
		// reconciliation.
		_, err := s.direct.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: pick()}))
		if err != nil && !errors.As(err, new(*connect.Error)) {
			t.Fatal(err)
		}
		if _, err := w.reconciler.Pass(ctx); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		return "delete at the backend, then reconcile"
	}
}

// FuzzEdgeQuotasMatchTheBackend drives random sequences of creates,
// deletes, forced deletes (of projects and organizations), deletes around
// the edge, over every protocol, compressed or not, for three subjects, and
// checks after each step that the edge counts for each subject the running
// environments the backend has. Its seeds run as a normal test.
func FuzzEdgeQuotasMatchTheBackend(f *testing.F) {
	// Each pair is (operation, argument): see step.
	f.Add([]byte{0x00, 0x8d, 0x01, 0x90, 0x00, 0x8d, 0x00, 0x90, 0x02, 0x8d, 0x00, 0x90, 0x03, 0x90, 0x00, 0x8d}) // gzip gRPC and gRPC-Web creates past the quota, gzip deletes
	f.Add([]byte{0x00, 0x10, 0x00, 0x10, 0x04, 0x10, 0x00, 0x10, 0x00, 0x0d, 0x40, 0x10, 0x00, 0x10})             // HTTP/JSON: forced DeleteProject, then forced DeleteOrganization
	f.Add([]byte{0x00, 0x02, 0x00, 0x08, 0x00, 0x05, 0x05, 0x02, 0x00, 0x11, 0x0b, 0x05, 0x00, 0x8c, 0x05, 0x86}) // deletes around the edge, reconciled
	f.Add([]byte{0x00, 0x90, 0x00, 0x8e, 0x00, 0x92, 0x04, 0x8d, 0x40, 0x91, 0x02, 0x8c, 0x05, 0x11, 0x00, 0x81}) // three subjects, mixed, compressed
	w := startQuotaWorld(f)
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := 0; i+1 < len(ops) && i < 2*16; i += 2 {
			w.check(t, ctx, w.step(t, ctx, ops[i], ops[i+1]))
		}
	})
}
