package health_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/health"
	"github.com/orgedge/edge/edge/wire"
)

// client puts the handler alone behind a cleartext HTTP/2 server, as the
// chain would hand it a health call, and returns grpc-go's health client
// (the one grpc-health-probe and Kubernetes' gRPC probes use).
func client(t *testing.T, o health.Options) healthpb.HealthClient {
	t.Helper()
	h := health.New(o)
	// A stand-in for the chain, which gives every call its state (a
	// Watch's record must know a stream the edge's shutdown ended).
	chain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := wire.Call{Protocol: wire.GRPC, Procedure: r.URL.Path, Streaming: strings.HasSuffix(r.URL.Path, "/Watch")}
		rec := call.NewRecorder(w, c)
		h.ServeHTTP(rec, r.WithContext(call.With(r.Context(), &call.State{Call: c, Rec: rec})))
	})
	s := httptest.NewUnstartedServer(chain)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	conn, err := grpc.NewClient(strings.TrimPrefix(s.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func check(name string, err error) admin.Check {
	return admin.Check{Name: name, Func: func(context.Context) error { return err }}
}

func TestCheckIsServingWhileEveryReadinessCheckPasses(t *testing.T) {
	c := client(t, health.Options{Checks: []admin.Check{check("issuer", nil), check("redis", nil)}, MaxBytes: 1 << 20})
	for _, service := range []string{"", "svc.v1.OrganizationService", "svc.v1.EnvironmentService"} {
		res, err := c.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q): %v, %v; want SERVING", service, res, err)
		}
	}
}

func TestCheckIsNotServingWhenOneCheckFails(t *testing.T) {
	c := client(t, health.Options{Checks: []admin.Check{check("issuer", nil), check("redis", errors.New("connection refused"))}, MaxBytes: 1 << 20})
	res, err := c.Check(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check: %v, %v; want NOT_SERVING", res, err)
	}
}

func TestAServiceTheEdgeDoesNotServeIsNotFound(t *testing.T) {
	c := client(t, health.Options{Checks: []admin.Check{check("issuer", nil)}, MaxBytes: 1 << 20})
	_, err := c.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: "svc.v1.NoSuchService"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check of an unknown service: %v, want NotFound", err)
	}
}

// TestWatchSendsTheStatusAtOnceThenEachChange: Watch answers SERVING at
// once, then NOT_SERVING when a check starts failing, on the same stream.
func TestWatchSendsTheStatusAtOnceThenEachChange(t *testing.T) {
	var failing atomic.Bool
	c := client(t, health.Options{Checks: []admin.Check{{Name: "redis", Func: func(context.Context) error {
		if failing.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}}, MaxBytes: 1 << 20})
	w, err := c.Watch(ctxT(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch's first answer: %v, %v; want SERVING", res, err)
	}
	failing.Store(true)
	if res, err := w.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch's next answer: %v, %v; want NOT_SERVING", res, err)
	}
}

func TestOneRunOfTheChecksAnswersEveryCallForASecond(t *testing.T) {
	var runs atomic.Int64
	c := client(t, health.Options{Checks: []admin.Check{{Name: "redis", Func: func(context.Context) error {
		runs.Add(1)
		return nil
	}}}, MaxBytes: 1 << 20})
	start := time.Now()
	const calls = 20
	for range calls {
		if _, err := c.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// However slow the machine, no more than one run per Reuse.
	most := 1 + int64(time.Since(start)/health.Reuse)
	if n := runs.Load(); n < 1 || n > most {
		t.Fatalf("%d calls ran the checks %d times, want at most %d (one a second)", calls, n, most)
	}
}

func TestARequestPastItsBoundIsRefused(t *testing.T) {
	c := client(t, health.Options{MaxBytes: 1 << 20})
	_, err := c.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: strings.Repeat("s", health.MaxMessageBytes+1)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a request past MaxMessageBytes: %v, want ResourceExhausted", err)
	}
}
