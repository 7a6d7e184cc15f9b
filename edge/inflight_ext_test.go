package edge_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
	"github.com/orgedge/edge/orgsvc/store"
)

// stallingStore holds every ListOrganizations in the backend, once it has
// told entered, until the test closes release.
type stallingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *stallingStore) ListOrganizations(ctx context.Context, userID string, page store.Page) ([]store.OrganizationSummary, string, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	return s.Store.ListOrganizations(ctx, userID, page)
}

// A replica serving listen.max_calls_in_flight unary calls (two here, held
// by a stalled backend) answers the next one unavailable at once, with
// EDGE_OVERLOADED and Retry-After, counted as the edge's own overload; a
// stream still opens (streams are not counted); once the held calls end,
// calls are served again.
func TestCallsPastMaxCallsInFlightAreAnsweredUnavailableAtOnce(t *testing.T) {
	t.Parallel()
	stall := &stallingStore{Store: testkit.OpenStore(t, testkit.SQLite), entered: make(chan struct{}, 2), release: make(chan struct{})}
	s, token := startStack(t, orgsvc.Config{Store: stall}, func(c *config.Config) { c.Listen.MaxCallsInFlight = 2 })
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("enterprise-inflight"))
	ctx := ctxT(t)
	_, prj := project(t, c, "inflight")
	env, err := createEnv(ctx, c, prj, "w")
	if err != nil {
		t.Fatal(err)
	}

	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
			held <- err
		}()
	}
	for range 2 {
		<-stall.entered
	}
	_, err = c.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "org_none"}))
	ce := wantError(t, err, connect.CodeUnavailable, "EDGE_OVERLOADED", "edge")
	if got := ce.Meta().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	if n := m.Sum("edge_unavailable_total", "reason", "overload"); n != 1 {
		t.Fatalf("edge_unavailable_total{reason=overload} %v, want 1", n)
	}

	stream, err := c.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("a stream opened past the bound of unary calls got no message: %v", stream.Err())
	}
	_ = stream.Close()

	close(stall.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
	if _, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatalf("after the held calls ended: %v", err)
	}
}
