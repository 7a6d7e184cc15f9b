package edge_test

import (
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// The answer of a call is read once (wire.Of), whichever steps need its
// result: the call's record, the idempotency capture, the limits that
// watch a CreateEnvironment answer. Not parallel: wire.Reads counts the
// whole process's readings.
func TestEachAnswerIsReadOncePerCall(t *testing.T) {
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-reads-ida")
	c := testkit.NewClients(s.edge.URL, testkit.GRPCWeb, tok)
	calls := 0
	// readsOf runs one call and returns how many answers were read for it,
	// once the edge has recorded it (edge_requests_total is counted last).
	readsOf := func(name string, call func() error) uint64 {
		t.Helper()
		before := wire.Reads.Load()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		calls++
		testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", name+" recorded", func(m testkit.Samples) bool {
			return m.Sum("edge_requests_total") == float64(calls)
		})
		return wire.Reads.Load() - before
	}
	var org *connect.Response[svcv1.Organization]
	var prj *connect.Response[svcv1.Project]
	if n := readsOf("an idempotent CreateOrganization", func() (err error) {
		r := req(&svcv1.CreateOrganizationRequest{Name: "reads-ida", BillingEmail: "ida@example.com"})
		r.Header().Set("Idempotency-Key", "org-reads-ida")
		org, err = c.Org.CreateOrganization(ctxT(t), r)
		return err
	}); n != 1 {
		t.Errorf("an idempotent CreateOrganization's answer was read %d times, want 1", n)
	}
	if n := readsOf("a CreateProject", func() (err error) {
		prj, err = c.Org.CreateProject(ctxT(t), req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
		return err
	}); n != 1 {
		t.Errorf("a CreateProject's answer was read %d times, want 1", n)
	}
	create := func() error {
		r := req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "redis-7", ProjectId: prj.Msg.Id})
		r.Header().Set("Idempotency-Key", "env-reads-ida")
		_, err := c.Env.CreateEnvironment(ctxT(t), r)
		return err
	}
	if n := readsOf("an idempotent CreateEnvironment", create); n != 1 {
		t.Errorf("an idempotent gRPC-Web CreateEnvironment's answer (kept, and read for its quota) was read %d times, want 1", n)
	}
	if n := readsOf("its replay", create); n != 0 {
		t.Errorf("a replay was read %d times, want 0: its code is the one kept", n)
	}
}
