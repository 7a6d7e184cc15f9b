package edge_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

func TestDurationByOutcomeAndEdgeOverheadOnForwardedCallsOnly(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-outcome-fay")
	if res, body := jsonCall(t, s.edge.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusOK {
		t.Fatalf("forwarded call: %d %v", res.StatusCode, body)
	}
	if res, _ := jsonCall(t, s.edge.URL, "not-a-token", listOrgs, "{}"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("refused call: %d", res.StatusCode)
	}
	// The client has its answer a moment before the edge records the call.
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "both calls recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") == 2
	})
	for outcome, want := range map[string]float64{"forwarded": 1, "refused": 1, "replayed": 0, "error": 0} {
		if got := m.Sum("edge_request_duration_seconds_count", "method", "ListOrganizations", "outcome", outcome); got != want {
			t.Errorf("edge_request_duration_seconds_count{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := m.Sum("edge_overhead_seconds_count", "method", "ListOrganizations"); got != 1 {
		t.Errorf("edge_overhead_seconds_count = %v, want 1: the forwarded call only", got)
	}
	overhead := m.Sum("edge_overhead_seconds_sum", "method", "ListOrganizations")
	total := m.Sum("edge_request_duration_seconds_sum", "method", "ListOrganizations", "outcome", "forwarded")
	upstream := m.Sum("edge_upstream_duration_seconds_sum", "method", "ListOrganizations")
	if overhead <= 0 || overhead >= total || upstream <= 0 || overhead+upstream > total*1.001 {
		t.Errorf("overhead %v + upstream %v should make up the call's %v", overhead, upstream, total)
	}
}

func TestReplayedErrorIsCountedWithItsOwnCode(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-replay-gus")
	res, org := jsonCall(t, s.edge.URL, tok, "/svc.v1.OrganizationService/CreateOrganization",
		`{"name":"replay-gus","billing_email":"gus@example.com"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("create: %d %v", res.StatusCode, org)
	}
	id, _ := org["id"].(string)
	res, list := jsonCall(t, s.edge.URL, tok, "/svc.v1.OrganizationService/ListMembers", `{"organization_id":"`+id+`"}`)
	members, _ := list["members"].([]any)
	if res.StatusCode != http.StatusOK || len(members) != 1 {
		t.Fatalf("members: %d %v", res.StatusCode, list)
	}
	userID, _ := members[0].(map[string]any)["userId"].(string)
	// Removing the last admin is failed_precondition, which Connect sends
	// as HTTP 400, like invalid_argument: the status cannot tell them apart.
	key := http.Header{"Idempotency-Key": {"remove-last-admin"}}
	for i := range 2 {
		res, body := jsonCallWith(t, testkit.HTTP1Client, key, s.edge.URL, tok, "/svc.v1.OrganizationService/RemoveMember",
			`{"organization_id":"`+id+`","user_id":"`+userID+`"}`)
		if res.StatusCode != http.StatusBadRequest || body["code"] != "failed_precondition" {
			t.Fatalf("call %d: %d %v, want 400 failed_precondition", i+1, res.StatusCode, body)
		}
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "both calls recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "RemoveMember") == 2
	})
	if got := m.Sum("edge_requests_total", "method", "RemoveMember", "code", "failed_precondition"); got != 2 {
		t.Errorf("RemoveMember failed_precondition = %v, want 2 (the first and its replay); invalid_argument = %v",
			got, m.Sum("edge_requests_total", "method", "RemoveMember", "code", "invalid_argument"))
	}
	if got := m.Sum("edge_request_duration_seconds_count", "method", "RemoveMember", "outcome", "replayed"); got != 1 {
		t.Errorf("replayed RemoveMember = %v, want 1", got)
	}
}

func TestAbandonedCallIsCanceledAndUnavailableNamesTheDependency(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{}) // ends the handlers at cleanup, whatever the edge did
	slow := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != listOrgs {
			http.NotFound(w, r)
			return
		}
		// Read the request as real backends do: an HTTP/1.1 server notices
		// a closed connection only once the body has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // the edge speaks h2c to its backend
	slow.Config.Protocols = &protocols
	slow.Start()
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs before slow.Close
	log := &logBuffer{}
	e := testkit.StartEdgeWith(t, testkit.EdgeConfig(t, slow.URL, iss.URL()), testkit.EdgeOptions{Logger: testkit.Logger(log, "json", slog.LevelInfo)})
	tok := testkit.Token(t, iss.URL(), "free-leaver-hal")

	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }() // the client gives up once the backend has the call
	r, _ := http.NewRequestWithContext(ctx, "POST", e.URL+listOrgs, strings.NewReader("{}"))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+tok)
	if res, err := testkit.HTTP1Client.Do(r); !errors.Is(err, context.Canceled) {
		var b []byte
		if res != nil {
			b, _ = io.ReadAll(res.Body)
			t.Logf("%d %v %s", res.StatusCode, res.Header, b)
		}
		t.Fatalf("client: %v, want canceled", err)
	}
	testkit.WaitFor(t, "the abandoned call counted", func() bool {
		return testkit.Scrape(t, e.AdminURL+"/metrics").Sum("edge_requests_total", "method", "ListOrganizations") == 1
	})
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	if got := m.Sum("edge_requests_total", "method", "ListOrganizations", "code", "canceled"); got != 1 {
		t.Errorf("canceled = %v, want 1 (ok: %v)", got, m.Sum("edge_requests_total", "code", "ok"))
	}
	if !strings.Contains(log.String(), `"code":"canceled"`) {
		t.Errorf("the access log does not say canceled:\n%s", log.String())
	}

	// The client's own short deadline passes while the backend holds the
	// call: deadline_exceeded, and the service's failure (a hanging
	// backend looks just so), not the client's choice.
	short := http.Header{"Connect-Timeout-Ms": {"300"}}
	if res, body := jsonCallWith(t, testkit.HTTP1Client, short, e.URL, tok, listOrgs, "{}"); body["code"] != "deadline_exceeded" {
		t.Fatalf("short deadline: %d %v", res.StatusCode, body)
	}
	m = testkit.ScrapeUntil(t, e.AdminURL+"/metrics", "the short deadline recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") == 2
	})
	if got := m.Sum("edge_deadline_exceeded_total", "origin", "backend"); got != 1 {
		t.Errorf("edge_deadline_exceeded_total{origin=backend} = %v, want 1 (client: %v, edge: %v)", got,
			m.Sum("edge_deadline_exceeded_total", "origin", "client"), m.Sum("edge_deadline_exceeded_total", "origin", "edge"))
	}

	// A backend that is gone: unavailable, reason upstream.
	gone := "http://" + testkit.DeadAddr(t)
	e2 := testkit.StartEdge(t, testkit.EdgeConfig(t, gone, iss.URL()))
	if res, _ := jsonCall(t, e2.URL, tok, listOrgs, "{}"); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", res.StatusCode)
	}
	m = testkit.ScrapeUntil(t, e2.AdminURL+"/metrics", "the call recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") == 1
	})
	for reason, want := range map[string]float64{"upstream": 1, "limits": 0, "idempotency": 0, "issuer": 0} {
		if got := m.Sum("edge_unavailable_total", "reason", reason); got != want {
			t.Errorf("edge_unavailable_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := m.Sum("edge_request_duration_seconds_count", "outcome", "error"); got != 1 {
		t.Errorf("outcome error = %v, want 1", got)
	}
}

func TestAnIdempotencyRefusalIsCountedAsRefusedWithItsCode(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-reuse-hal")
	key := http.Header{"Idempotency-Key": {"reused-for-another-org"}}
	res, body := jsonCallWith(t, testkit.HTTP1Client, key, s.edge.URL, tok, "/svc.v1.OrganizationService/CreateOrganization",
		`{"name":"reuse-hal","billing_email":"hal@example.com"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d %v", res.StatusCode, body)
	}
	res, body = jsonCallWith(t, testkit.HTTP1Client, key, s.edge.URL, tok, "/svc.v1.OrganizationService/CreateOrganization",
		`{"name":"reuse-hal-2","billing_email":"hal@example.com"}`)
	if res.StatusCode != http.StatusBadRequest || body["code"] != "invalid_argument" {
		t.Fatalf("the key reused for another request: %d %v, want 400 invalid_argument", res.StatusCode, body)
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "both calls recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "CreateOrganization") == 2
	})
	if got := m.Sum("edge_requests_total", "method", "CreateOrganization", "code", "invalid_argument"); got != 1 {
		t.Errorf("CreateOrganization invalid_argument = %v, want 1", got)
	}
	for outcome, want := range map[string]float64{"forwarded": 1, "refused": 1, "error": 0} {
		if got := m.Sum("edge_request_duration_seconds_count", "method", "CreateOrganization", "outcome", outcome); got != want {
			t.Errorf("CreateOrganization outcome %s = %v, want %v: the edge refused the reused key", outcome, got, want)
		}
	}
}

// TestCallsTheEdgeAnswersItselfAreCountedAnswered: GetUsage and gRPC's
// health Check are answered by the edge, not the backend. Answered, they
// are neither refused nor errors: a dashboard of errors by outcome must
// not count a load balancer's health checks, nor the refusals panel a
// customer reading its usage.
func TestCallsTheEdgeAnswersItselfAreCountedAnswered(t *testing.T) {
	t.Parallel()
	s, token := startTracedStack(t, orgsvc.Config{}, nil) // its log is kept
	if res, body := jsonCall(t, s.edge.URL, token("free-answered-ann"), "/svc.v1.UsageService/GetUsage", "{}"); res.StatusCode != http.StatusOK {
		t.Fatalf("GetUsage: %d %v", res.StatusCode, body)
	}
	if _, err := healthClient(t, s.edge.URL).Check(ctxT(t), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("health Check: %v", err)
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "both calls recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "GetUsage")+m.Sum("edge_requests_total", "method", "Check") == 2
	})
	for _, method := range []string{"GetUsage", "Check"} {
		for outcome, want := range map[string]float64{"answered": 1, "forwarded": 0, "refused": 0, "replayed": 0, "error": 0} {
			if got := m.Sum("edge_request_duration_seconds_count", "method", method, "outcome", outcome); got != want {
				t.Errorf("%s: edge_request_duration_seconds_count{outcome=%q} = %v, want %v", method, outcome, got, want)
			}
		}
	}
	testkit.WaitFor(t, "both access lines", func() bool { return strings.Count(s.edgeLog.String(), `"outcome":"answered"`) == 2 })
}
