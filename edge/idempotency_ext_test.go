package edge_test

import (
	"net/http"
	"sync"
	"testing"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

func TestFiftyConcurrentCreatesWithOneKeyRunOnceThroughTheEdge(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("pro-idempotent")
	create := func(name string) (*connect.Response[svcv1.Organization], error) {
		r := req(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "a@b.example"})
		r.Header().Set("Idempotency-Key", `"create-acme-1"`)
		return testkit.NewClients(s.edge.URL, testkit.ConnectJSON, tok).Org.CreateOrganization(ctxT(t), r)
	}
	var (
		mu      sync.Mutex
		ids     = map[string]int{}
		aborted int
		wg      sync.WaitGroup
	)
	for range 50 {
		wg.Go(func() {
			res, err := create("once")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				wantError(t, err, connect.CodeAborted, "IDEMPOTENCY_KEY_IN_USE", "edge")
				aborted++
				return
			}
			ids[res.Msg.Id]++
		})
	}
	wg.Wait()
	if len(ids) != 1 {
		t.Fatalf("50 callers saw %d different organizations: %v", len(ids), ids)
	}
	list, err := testkit.NewClients(s.edge.URL, testkit.GRPC, tok).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
	if err != nil || len(list.Msg.Organizations) != 1 {
		t.Fatalf("the backend holds %v (%v), want exactly one organization", list, err)
	}
	later, err := create("once")
	if err != nil || later.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a later duplicate: %v, Idempotent-Replayed %q", err, later.Header().Get("Idempotent-Replayed"))
	}
	if _, ok := ids[later.Msg.Id]; !ok {
		t.Fatalf("the replay names %s, not the organization created", later.Msg.Id)
	}
	t.Logf("%d callers got the answer, %d got aborted", 50-aborted, aborted)

	_, err = create("another-body")
	wantError(t, err, connect.CodeInvalidArgument, "IDEMPOTENCY_KEY_REUSED", "edge")

	// The same key from another subject is another key.
	r := req(&svcv1.CreateOrganizationRequest{Name: "theirs", BillingEmail: "a@b.example"})
	r.Header().Set("Idempotency-Key", `"create-acme-1"`)
	other, err := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("pro-someone-else")).Org.CreateOrganization(ctxT(t), r)
	if err != nil || other.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("another subject's call: %v, replayed %q", err, other.Header().Get("Idempotent-Replayed"))
	}
}

func TestDeterministicErrorsAreReplayedInGRPCWithTheirDetails(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("enterprise-grpc-idem"))
	if _, err := c.Org.CreateOrganization(ctxT(t), req(&svcv1.CreateOrganizationRequest{Name: "taken", BillingEmail: "a@b.example"})); err != nil {
		t.Fatal(err)
	}
	call := func() (http.Header, error) {
		r := req(&svcv1.CreateOrganizationRequest{Name: "taken", BillingEmail: "a@b.example"})
		r.Header().Set("Idempotency-Key", "dup-1")
		_, err := c.Org.CreateOrganization(ctxT(t), r)
		var ce *connect.Error
		if err != nil && errorAs(err, &ce) {
			return ce.Meta(), err
		}
		return nil, err
	}
	_, first := call()
	wantError(t, first, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN", "svc.v1.OrganizationService")
	meta, again := call()
	wantError(t, again, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN", "svc.v1.OrganizationService")
	if meta.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the duplicate was not replayed: %v", meta)
	}
}
