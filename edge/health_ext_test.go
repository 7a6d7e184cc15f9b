package edge_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/health"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestGRPCHealthOnTheAPIPortAnswersWithoutATokenAndFollowsReadiness:
// grpc-go's health client, with no token, asks the API port: SERVING for
// the edge and for one of the API's services, not_found for a service it
// does not serve; NOT_SERVING once a readiness check fails (Redis down
// under fail_closed, as /readyz says), SERVING again once it is back.
// Watch streams the same status: SERVING at once, NOT_SERVING when Redis
// goes, SERVING when it is back (SERVICE_UNKNOWN for a service the edge
// does not serve). Each call has its access line and is counted. Before,
// Watch answered unimplemented.
func TestGRPCHealthOnTheAPIPortAnswersWithoutATokenAndFollowsReadiness(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	s, _ := startTracedStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Redis.Addr = rs.Addr
		c.Limits.OnRedisFailure = config.FailClosed
	})
	client := healthClient(t, s.edge.URL)
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
	_, err := check("no.such.Service")
	calls++
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check of a service the edge does not serve: %v, want not_found", err)
	}
	watchCtx, endWatches := context.WithCancel(ctxT(t))
	watch := func(service string) grpc_health_v1.Health_WatchClient {
		w, err := client.Watch(watchCtx, &grpc_health_v1.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		calls++
		return w
	}
	next := func(w grpc_health_v1.Health_WatchClient, want grpc_health_v1.HealthCheckResponse_ServingStatus) {
		t.Helper()
		res, err := w.Recv()
		if err != nil || res.GetStatus() != want {
			t.Fatalf("Watch: %v %v, want %v", res.GetStatus(), err, want)
		}
	}
	unknown := watch("no.such.Service")
	next(unknown, grpc_health_v1.HealthCheckResponse_SERVICE_UNKNOWN)
	edgeWatch, envWatch := watch(""), watch("svc.v1.EnvironmentService")
	next(edgeWatch, grpc_health_v1.HealthCheckResponse_SERVING)
	next(envWatch, grpc_health_v1.HealthCheckResponse_SERVING)

	rs.Stop()
	next(edgeWatch, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	next(envWatch, grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	testkit.WaitFor(t, "Check NOT_SERVING with Redis down under fail_closed", func() bool {
		got, err := check("")
		calls++
		if err != nil {
			t.Fatalf("Check with Redis down: %v, want an answer", err)
		}
		return got == grpc_health_v1.HealthCheckResponse_NOT_SERVING
	})
	rs.Start()
	next(edgeWatch, grpc_health_v1.HealthCheckResponse_SERVING)
	next(envWatch, grpc_health_v1.HealthCheckResponse_SERVING)
	testkit.WaitFor(t, "Check SERVING once Redis is back", func() bool {
		got, err := check("")
		calls++
		return err == nil && got == grpc_health_v1.HealthCheckResponse_SERVING
	})
	endWatches()

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

// healthClient is grpc-go's health client on the edge's API port, with no
// token.
func healthClient(t *testing.T, edgeURL string) grpc_health_v1.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(edgeURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return grpc_health_v1.NewHealthClient(conn)
}

// Watch needs no token and holds no subject's stream cap, so the edge
// bounds it itself: at most health.MaxWatchesPerAddress open from one
// client address (the next is refused resource_exhausted until one
// closes), and each ends on SIGTERM with unavailable EDGE_SHUTTING_DOWN,
// like every stream, so that the watcher moves to another replica.
func TestGRPCHealthWatchIsBoundedPerAddressAndEndsWhenTheEdgeShutsDown(t *testing.T) {
	t.Parallel()
	s, _ := startStack(t, orgsvc.Config{}, nil)
	client := healthClient(t, s.edge.URL)
	var cancels []context.CancelFunc
	var watches []grpc_health_v1.Health_WatchClient
	for range health.MaxWatchesPerAddress {
		ctx, cancel := context.WithCancel(ctxT(t))
		w, err := client.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := w.Recv(); err != nil || res.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("Watch: %v %v, want SERVING", res.GetStatus(), err)
		}
		cancels, watches = append(cancels, cancel), append(watches, w)
	}
	refused, err := client.Watch(ctxT(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = refused.Recv()
	wantGRPCReason(t, err, codes.ResourceExhausted, "HEALTH_WATCHES_EXCEEDED")

	cancels[0]() // one closes: a new watch from the address is admitted again
	testkit.WaitFor(t, "a Watch admitted once one closed", func() bool {
		w, err := client.Watch(ctxT(t), &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.Recv()
		if err == nil {
			watches[0] = w
			return res.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
		}
		wantGRPCReason(t, err, codes.ResourceExhausted, "HEALTH_WATCHES_EXCEEDED")
		return false
	})

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- s.edge.App.Shutdown(ctx)
	}()
	for _, w := range watches {
		_, err := w.Recv()
		wantGRPCReason(t, err, codes.Unavailable, "EDGE_SHUTTING_DOWN")
	}
	if err := <-shutdown; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("shutdown: %v", err)
	}
}

// A Watch ends at its deadline, requests.max_stream_timeout at most, with
// deadline_exceeded (the watcher opens another), whatever the watcher's own
// deadline.
func TestGRPCHealthWatchEndsAtTheStreamDeadline(t *testing.T) {
	t.Parallel()
	s, _ := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Requests.MaxStreamTimeout = 2 * time.Second })
	w, err := healthClient(t, s.edge.URL).Watch(ctxT(t), &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if res, err := w.Recv(); err != nil || res.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v, want SERVING", res.GetStatus(), err)
	}
	_, err = w.Recv()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Watch past max_stream_timeout: %v, want deadline_exceeded", err)
	}
	if d := time.Since(start); d > time.Minute/2 {
		t.Fatalf("Watch ended after %v, want about 2s", d)
	}
}

// wantGRPCReason asserts a gRPC status's code and the reason of its
// ErrorInfo (domain edge).
func wantGRPCReason(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Reason == reason && ei.Domain == "edge" {
			return
		}
	}
	t.Fatalf("got %v with details %v, want reason %s", err, st.Details(), reason)
}
