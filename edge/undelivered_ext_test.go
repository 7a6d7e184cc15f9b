package edge_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// A call the edge could deliver to no backend (every connection refused)
// is answered 503 UPSTREAM_UNAVAILABLE and not counted in the day's or the
// month's usage: a client retrying through an outage is not charged for
// it. GetUsage shows the calls the backend saw, and itself.
func TestCallsNoBackendReceivedAreNotCountedInTheDailyUsage(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	bu, err := url.Parse(be.URL)
	if err != nil {
		t.Fatal(err)
	}
	fp := testkit.StartFaultProxy(t, bu.Host)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, "http://"+fp.Addr, iss.URL()))
	tok := testkit.Token(t, iss.URL(), "alice")

	fp.Refuse()                           // the backend is down before the edge made any connection
	for _, p := range testkit.Protocols { // both legs: HTTP/1.1 and h2c (gRPC)
		c := testkit.NewClients(e.URL, p, tok)
		_, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		wantError(t, err, connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "edge")
	}
	// And as curl sees it: the specification's JSON error, refunded too.
	a := curl(t, "-X", "POST", "-H", "Authorization: Bearer "+tok, "-H", "Content-Type: application/json", "-d", "{}",
		e.URL+svcv1connect.OrganizationServiceListOrganizationsProcedure)
	wantSpecError(t, "curl during the outage", a, http.StatusServiceUnavailable, "unavailable", "UPSTREAM_UNAVAILABLE", "edge")
	undelivered := len(testkit.Protocols) + 1
	fp.Heal()
	c := testkit.NewClients(e.URL, testkit.GRPC, tok)
	for range 2 {
		if _, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatalf("with the backend back: %v", err)
		}
	}
	u, err := c.Usage.GetUsage(ctxT(t), req(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	// Two calls the backend answered, and GetUsage.
	if got := u.Msg.ApiUsage.RequestsToday; got != 3 {
		t.Fatalf("%d requests counted today, want 3: the %d calls no backend received count for nothing", got, undelivered)
	}
	if got := u.Msg.ApiUsage.RequestsThisMonth; got != 3 {
		t.Fatalf("%d requests counted this month, want 3", got)
	}
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if n := m.Sum("edge_usage_refunds_total", "outcome", "refunded"); n != float64(undelivered) {
		t.Fatalf("edge_usage_refunds_total{outcome=refunded} %v, want %d", n, undelivered)
	}
	if n := m.Sum("edge_usage_refunds_total", "outcome", "failed"); n != 0 {
		t.Fatalf("edge_usage_refunds_total{outcome=failed} %v, want 0", n)
	}
}

// A call the backend received is charged whatever became of its answer:
// the backend may have acted on it. Here the backend reads each call and
// then drops it (the connection closed over HTTP/1.1, the stream reset over
// HTTP/2): the client gets 503 UPSTREAM_UNAVAILABLE, and the call counts.
func TestCallsTheBackendReceivedAreCountedEvenWhenItsAnswerIsLost(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	var received atomic.Int64
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
		panic(http.ErrAbortHandler)
	}))
	be.Config.Protocols = new(http.Protocols)
	be.Config.Protocols.SetHTTP1(true)
	be.Config.Protocols.SetUnencryptedHTTP2(true)
	be.Config.ErrorLog = log.New(io.Discard, "", 0) // the aborts are the point
	be.Start()
	t.Cleanup(be.Close)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, be.URL, iss.URL()))
	tok := testkit.Token(t, iss.URL(), "alice")

	for _, p := range testkit.Protocols {
		c := testkit.NewClients(e.URL, p, tok)
		_, err := c.Org.CreateOrganization(ctxT(t), req(&svcv1.CreateOrganizationRequest{Name: "acme"}))
		wantError(t, err, connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "edge")
	}
	if n := received.Load(); n != int64(len(testkit.Protocols)) {
		t.Fatalf("the backend received %d calls, want %d", n, len(testkit.Protocols))
	}
	u, err := testkit.NewClients(e.URL, testkit.GRPC, tok).Usage.GetUsage(ctxT(t), req(&svcv1.GetUsageRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.Msg.ApiUsage.RequestsToday, int32(len(testkit.Protocols)+1); got != want {
		t.Fatalf("%d requests counted today, want %d: every call the backend received, and GetUsage", got, want)
	}
	if n := testkit.Scrape(t, e.AdminURL+"/metrics").Sum("edge_usage_refunds_total"); n != 0 {
		t.Fatalf("edge_usage_refunds_total %v, want 0", n)
	}
}
