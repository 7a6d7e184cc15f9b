package edge_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// environmentToWatch creates an organization, a project and an
// environment, and returns the environment's id.
func environmentToWatch(t *testing.T, c testkit.Clients) string {
	t.Helper()
	ctx := ctxT(t)
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "metrics", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	return env.Msg.Environment.Id
}

func TestEveryMetricIsExportedByTheEdgeAndTheBackendAfterTraffic(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("pro-exported"))
	id := environmentToWatch(t, c)
	stream, err := c.Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
	if err != nil || !stream.Receive() {
		t.Fatalf("watch: %v %v", err, stream.Err())
	}
	stream.Close()
	keyed := req(&svcv1.CreateOrganizationRequest{Name: "keyed", BillingEmail: "a@b.example"})
	keyed.Header().Set("Idempotency-Key", "exported-1")
	if _, err := c.Org.CreateOrganization(ctxT(t), keyed); err != nil {
		t.Fatal(err)
	}

	edgeMetrics := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	for _, name := range []string{
		"edge_requests_total", "edge_request_duration_seconds", "edge_token_cache_hits_total", "edge_token_verifications_total",
		"edge_build_info", "edge_limit_decisions_total", "edge_redis_breaker_state", "edge_fail_open_active",
		"edge_redis_calls_total", "edge_redis_errors_total", "edge_redis_round_trips_total", "edge_idempotency_total",
		"edge_upstream_duration_seconds", "edge_quota_reservations_total", "edge_open_streams", "edge_stream_leases_held",
		"edge_stream_lease_renewals_total", "edge_stream_lease_renewal_rounds_total",
		"edge_redis_duration_seconds", "edge_inflight_requests",
		"edge_redis_breaker_opens_total", "edge_fail_open_decisions_total", "edge_limits_unavailable_total",
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !edgeMetrics.Has(name) {
			t.Errorf("the edge does not export %s", name)
		}
	}
	backendMetrics := testkit.Scrape(t, s.backend.AdminURL+"/metrics")
	for _, name := range []string{
		"orgsvc_requests_total", "orgsvc_request_duration_seconds", "orgsvc_storage_duration_seconds", "orgsvc_build_info",
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if !backendMetrics.Has(name) {
			t.Errorf("the backend does not export %s", name)
		}
	}
	// Bounded labels: no series names a subject, a token or an organization.
	sub := subjectOf(t, token("pro-exported"))
	for _, m := range []testkit.Samples{edgeMetrics, backendMetrics} {
		for _, l := range m.Lines {
			for k, v := range l.Labels {
				if strings.Contains(v, sub) || strings.Contains(v, id) || k == "subject" || k == "organization" {
					t.Errorf("%s has label %s=%q", l.Name, k, v)
				}
			}
		}
	}
}

func TestAnOpenWatchCountsAsOneOpenStreamOneLeaseAndOneCallInFlight(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("pro-streams"))
	id := environmentToWatch(t, c)
	url := s.edge.AdminURL + "/metrics"
	watch := []string{"service", "svc.v1.EnvironmentService", "method", "WatchEnvironment"}

	before := testkit.Scrape(t, url)
	if !before.Has("edge_open_streams") || before.Sum("edge_open_streams", watch...) != 0 || before.Sum("edge_stream_leases_held") != 0 {
		t.Fatalf("before any stream: open %v, leases %v", before.Sum("edge_open_streams", watch...), before.Sum("edge_stream_leases_held"))
	}
	stream, err := c.Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
	if err != nil || !stream.Receive() {
		t.Fatalf("watch: %v %v", err, stream.Err())
	}
	open := testkit.Scrape(t, url)
	if got := open.Sum("edge_open_streams", watch...); got != 1 {
		t.Errorf("edge_open_streams = %v while a Watch is open, want 1", got)
	}
	if got := open.Sum("edge_stream_leases_held"); got != 1 {
		t.Errorf("edge_stream_leases_held = %v while a Watch is open, want 1", got)
	}
	if got := open.Sum("edge_inflight_requests"); got != 1 {
		t.Errorf("edge_inflight_requests = %v while a Watch is open, want 1", got)
	}
	stream.Close()
	testkit.ScrapeUntil(t, url, "all back to 0 after the Watch ended", func(m testkit.Samples) bool {
		return m.Sum("edge_open_streams", watch...) == 0 && m.Sum("edge_stream_leases_held") == 0 && m.Sum("edge_inflight_requests") == 0
	})
}

func TestQuotaReservationsAreReservedConfirmedRolledBackAndReleased(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("pro-quota"))
	url := s.edge.AdminURL + "/metrics"
	count := func(m testkit.Samples, outcome string) float64 {
		return m.Sum("edge_quota_reservations_total", "outcome", outcome)
	}
	m := testkit.Scrape(t, url)
	for _, o := range []string{"reserved", "confirmed", "rolled_back", "released", "refused"} {
		if !strings.Contains(strings.Join(labelValues(m, "edge_quota_reservations_total", "outcome"), ","), o) || count(m, o) != 0 {
			t.Errorf("before any environment: outcome %s = %v, want an exported 0", o, count(m, o))
		}
	}

	id := environmentToWatch(t, c)
	m = testkit.Scrape(t, url)
	if count(m, "reserved") != 1 || count(m, "confirmed") != 1 || count(m, "rolled_back") != 0 {
		t.Errorf("after CreateEnvironment: reserved %v confirmed %v rolled_back %v, want 1 1 0", count(m, "reserved"), count(m, "confirmed"), count(m, "rolled_back"))
	}

	// The backend refuses: the reservation is rolled back.
	_, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e2", BlueprintId: "go-api", ProjectId: "no-such-project"}))
	if connect.CodeOf(err) != connect.CodeNotFound && connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("CreateEnvironment in a missing project: %v", err)
	}
	testkit.ScrapeUntil(t, url, "rolled_back after a refused CreateEnvironment", func(m testkit.Samples) bool {
		return count(m, "reserved") == 2 && count(m, "rolled_back") == 1 && count(m, "confirmed") == 1
	})

	if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: id})); err != nil {
		t.Fatal(err)
	}
	testkit.ScrapeUntil(t, url, "released after DeleteEnvironment", func(m testkit.Samples) bool { return count(m, "released") == 1 })
}

func labelValues(m testkit.Samples, name, label string) []string {
	var vs []string
	for _, l := range m.Lines {
		if l.Name == name {
			vs = append(vs, l.Labels[label])
		}
	}
	return vs
}

func TestTheUpstreamHistogramCountsExactlyTheCallsForwarded(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	ctx := ctxT(t)
	tok := token("pro-upstream")
	const forwarded = 5
	for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.GRPC, testkit.GRPCWeb, testkit.HTTPJSON, testkit.ConnectProto}[:forwarded] {
		if _, err := testkit.NewClients(s.edge.URL, p, tok).Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	// Not forwarded: a refusal, and GetUsage, which the edge answers itself.
	if _, err := testkit.NewClients(s.edge.URL, testkit.GRPC, "").Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err == nil {
		t.Fatal("a call without a token passed")
	}
	if _, err := testkit.NewClients(s.edge.URL, testkit.GRPC, tok).Usage.GetUsage(ctx, req(&svcv1.GetUsageRequest{})); err != nil {
		t.Fatal(err)
	}
	m := testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every call counted", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total") == forwarded+2
	})
	if got := m.Sum("edge_upstream_duration_seconds_count"); got != forwarded {
		t.Errorf("edge_upstream_duration_seconds_count = %v, want %d (calls forwarded)", got, forwarded)
	}
	list := []string{"service", "svc.v1.OrganizationService", "method", "ListOrganizations"}
	if got := m.Sum("edge_upstream_duration_seconds_count", append(list, "protocol", "grpc")...); got != 1 {
		t.Errorf("gRPC ListOrganizations forwarded %v times, want 1", got)
	}
	// The backend's last byte comes before the edge's: upstream time is part
	// of the call's time.
	if up, all := m.Sum("edge_upstream_duration_seconds_sum"), m.Sum("edge_request_duration_seconds_sum", list...); up <= 0 || up > all {
		t.Errorf("upstream time %v, time of the forwarded calls %v", up, all)
	}
	be := testkit.Scrape(t, s.backend.AdminURL+"/metrics")
	if got := be.Sum("orgsvc_requests_total", append(list, "code", "ok")...); got != forwarded {
		t.Errorf("the backend answered %v ListOrganizations, want %d", got, forwarded)
	}
}

func TestRedisRoundTripsAreTimedByOp(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, token("pro-redis"))
	r := req(&svcv1.CreateOrganizationRequest{Name: "redis-op", BillingEmail: "a@b.example"})
	r.Header().Set("Idempotency-Key", "redis-op-1")
	if _, err := c.Org.CreateOrganization(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	trips, timed := m.Sum("edge_redis_round_trips_total"), m.Sum("edge_redis_duration_seconds_count")
	if trips == 0 || timed != trips {
		t.Errorf("%v round trips timed, %v counted: want every one timed", timed, trips)
	}
	ops := labelValues(m, "edge_redis_duration_seconds_count", "op")
	if m.Sum("edge_redis_duration_seconds_count", "op", "evalsha")+m.Sum("edge_redis_duration_seconds_count", "op", "eval") == 0 {
		t.Errorf("no script timed; ops %v", ops)
	}
	for _, op := range ops {
		if op != strings.ToLower(op) || op == "" {
			t.Errorf("op label %q", op)
		}
	}
	if !strings.Contains(testkit.Scrape(t, s.edge.AdminURL+"/metrics").Families["edge_redis_duration_seconds"], "histogram") {
		t.Error("edge_redis_duration_seconds is not a histogram")
	}
	// Buckets from 0.1ms to 1s.
	les := labelValues(m, "edge_redis_duration_seconds_bucket", "le")
	if len(les) == 0 || les[0] != "0.0001" || !strings.Contains(strings.Join(les, " "), " 1 ") {
		t.Errorf("buckets %v", les)
	}
}

func TestTheBackendCountsCallsByCodeAndTimesStorageByOperation(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("pro-backend"))
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "backend-metrics", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: "00000000-0000-0000-0000-000000000000"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get a missing organization: %v", err)
	}
	m := testkit.Scrape(t, s.backend.AdminURL+"/metrics")
	org1 := []string{"service", "svc.v1.OrganizationService", "method", "CreateOrganization", "code", "ok"}
	if got := m.Sum("orgsvc_requests_total", org1...); got != 1 {
		t.Errorf("CreateOrganization ok = %v, want 1", got)
	}
	if got := m.Sum("orgsvc_requests_total", "method", "GetOrganization", "code", "not_found"); got != 1 {
		t.Errorf("GetOrganization not_found = %v, want 1", got)
	}
	if got := m.Sum("orgsvc_request_duration_seconds_count", "method", "CreateOrganization"); got != 1 {
		t.Errorf("CreateOrganization timed %v times, want 1", got)
	}
	if got := m.Sum("orgsvc_storage_duration_seconds_count", "operation", "CreateOrganization"); got != 1 {
		t.Errorf("storage CreateOrganization timed %v times, want 1", got)
	}
	if m.Sum("orgsvc_build_info", "version", "test") != 1 {
		t.Error("no orgsvc_build_info{version=test}")
	}
	for _, l := range m.Lines {
		for _, v := range l.Labels {
			if strings.Contains(v, org.Msg.Id) {
				t.Errorf("%s names an organization", l.Name)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := testkit.HTTP1Client.Get(s.backend.AdminURL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, res.Status)
		}
	}
}
