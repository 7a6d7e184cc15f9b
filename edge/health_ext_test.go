package edge_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestGRPCHealthOnTheAPIPortAnswersWithoutATokenAndFollowsReadiness:
// grpc-go's health client, with no token, asks the API port: SERVING for
// the edge and for one of the API's services, not_found for a service it
// does not serve; NOT_SERVING once a readiness check fails (Redis down
// under fail_closed, as /readyz says), SERVING again once it is back.
// Watch answers unimplemented, at once, as gRPC's health schema allows.
// Each call has its access line and is counted. Before, Check answered
// unimplemented.
func TestGRPCHealthOnTheAPIPortAnswersWithoutATokenAndFollowsReadiness(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	s, _ := startTracedStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Redis.Addr = rs.Addr
		c.Limits.OnRedisFailure = config.FailClosed
	})
	conn, err := grpc.NewClient(strings.TrimPrefix(s.edge.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := grpc_health_v1.NewHealthClient(conn)
	check := func(service string) (grpc_health_v1.HealthCheckResponse_ServingStatus, error) {
		res, err := client.Check(ctxT(t), &grpc_health_v1.HealthCheckRequest{Service: service})
		return res.GetStatus(), err
	}
	calls := 0
	for _, service := range []string{"", "svc.v1.EnvironmentService"} {
		got, err := check(service)
		calls++
		if err != nil || got != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) without a token: %v %v, want SERVING", service, got, err)
		}
	}
	_, err = check("no.such.Service")
	calls++
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check of a service the edge does not serve: %v, want not_found", err)
	}
	watch, err := client.Watch(ctxT(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = watch.Recv()
	calls++
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Watch: %v, want unimplemented", err)
	}

	rs.Stop()
	testkit.WaitFor(t, "NOT_SERVING with Redis down under fail_closed", func() bool {
		got, err := check("")
		calls++
		if err != nil {
			t.Fatalf("Check with Redis down: %v, want an answer", err)
		}
		return got == grpc_health_v1.HealthCheckResponse_NOT_SERVING
	})
	rs.Start()
	testkit.WaitFor(t, "SERVING once Redis is back", func() bool {
		got, err := check("")
		calls++
		return err == nil && got == grpc_health_v1.HealthCheckResponse_SERVING
	})

	lines := func() int {
		return strings.Count(s.edgeLog.String(), `"procedure":"/grpc.health.v1.Health/Check"`) +
			strings.Count(s.edgeLog.String(), `"procedure":"/grpc.health.v1.Health/Watch"`)
	}
	testkit.WaitFor(t, "an access line per health call", func() bool { return lines() >= calls })
	if n := lines(); n != calls {
		t.Errorf("%d access lines for %d health calls", n, calls)
	}
	testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every health call counted", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "service", config.HealthService) == float64(calls)
	})
}
