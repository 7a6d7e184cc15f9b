package orgsvc_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

func TestStartServesMetricsHealthAndReadinessOnItsAdminListener(t *testing.T) {
	iss := testkit.StartIssuer(t)
	r, err := orgsvc.Start(ctxT(t), orgsvc.RunOptions{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Version: "v1.2.3",
		Database: filepath.Join(t.TempDir(), "orgsvc.db"), IssuerURL: iss.URL(), Audience: "api",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	c := testkit.NewClients("http://"+r.Addr, testkit.ConnectProto, testkit.Token(t, iss.URL(), "alice"))
	if _, err := c.Org.ListOrganizations(ctxT(t), connect.NewRequest(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatal(err)
	}
	admin := "http://" + r.AdminAddr
	m := testkit.Scrape(t, admin+"/metrics")
	for _, name := range []string{"orgsvc_requests_total", "orgsvc_request_duration_seconds", "orgsvc_storage_duration_seconds",
		"orgsvc_build_info", "go_goroutines", "process_cpu_seconds_total"} {
		if !m.Has(name) {
			t.Errorf("no %s", name)
		}
	}
	if m.Sum("orgsvc_build_info", "version", "v1.2.3") != 1 {
		t.Error("orgsvc_build_info does not name the version")
	}
	if m.Sum("orgsvc_requests_total", "service", "svc.v1.OrganizationService", "method", "ListOrganizations", "code", "ok") != 1 {
		t.Error("the call is not counted")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := testkit.HTTP1Client.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, res.Status)
		}
	}
	// The API listener does not serve them.
	res, err := testkit.HTTP1Client.Get("http://" + r.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Error("the API listener serves /metrics")
	}
}

func TestHandlerSpansContinueTheCallersTraceAndStorageSpansNameTheDatabase(t *testing.T) {
	for _, db := range testkit.Databases {
		t.Run(string(db), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			iss := testkit.StartIssuer(t)
			be := testkit.StartBackend(t, db, iss.URL(), orgsvc.Config{TracerProvider: tp})
			c := testkit.NewClients(be.URL, testkit.GRPC, testkit.Token(t, iss.URL(), "bob"))
			// As the edge sends it: its upstream span's context.
			const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
			req := connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: "00000000-0000-0000-0000-000000000000"})
			req.Header().Set("Traceparent", "00-"+traceID+"-"+spanID+"-01")
			if _, err := c.Org.GetOrganization(ctxT(t), req); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("got %v, want not_found", err)
			}
			const procedure = "svc.v1.OrganizationService/GetOrganization"
			var handler tracetest.SpanStub
			for _, sp := range exp.GetSpans() {
				if sp.Name == procedure {
					handler = sp
				}
			}
			if handler.SpanContext.TraceID().String() != traceID || handler.Parent.SpanID().String() != spanID || handler.SpanKind != trace.SpanKindServer {
				t.Fatalf("handler span %+v, want a server span child of %s/%s", handler, traceID, spanID)
			}
			var stores []string
			for _, sp := range exp.GetSpans() {
				if !strings.HasPrefix(sp.Name, "store.") {
					continue
				}
				stores = append(stores, sp.Name)
				if sp.Parent.SpanID() != handler.SpanContext.SpanID() {
					t.Errorf("%s is not the handler's child", sp.Name)
				}
				want := map[testkit.Database]string{testkit.SQLite: "sqlite", testkit.Postgres: "postgresql"}[db]
				for _, kv := range sp.Attributes {
					if kv.Key == "db.system" && kv.Value.AsString() != want {
						t.Errorf("%s: db.system %q, want %q", sp.Name, kv.Value.AsString(), want)
					}
				}
				// Not a member (not found) is an answer, not a failure.
				if sp.Status.Code != 0 {
					t.Errorf("%s has status %v", sp.Name, sp.Status)
				}
			}
			// A person's access to an organization is their membership.
			if !strings.Contains(strings.Join(stores, " "), "store.GetMember") {
				t.Errorf("storage spans %v lack store.GetMember", stores)
			}
		})
	}
}
