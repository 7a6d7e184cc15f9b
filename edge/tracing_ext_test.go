package edge_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// tracedStack is an issuer, a backend and the edge in front of it, which
// share one in-memory tracer provider and log into buffers.
type tracedStack struct {
	stack
	spans   *tracetest.InMemoryExporter
	edgeLog *logBuffer
	backLog *logBuffer
}

// logBuffer is a bytes.Buffer that is safe to write from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startTracedStack(t *testing.T, svc orgsvc.Config, change func(*config.Config)) (*tracedStack, func(string) string) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s := &tracedStack{spans: exp, edgeLog: &logBuffer{}, backLog: &logBuffer{}}
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}

	iss := testkit.SharedIssuer(t)
	svc.TracerProvider = tp
	svc.Logger = slog.New(slog.NewJSONHandler(s.backLog, debug))
	s.backend = testkit.StartBackend(t, testkit.SQLite, iss.URL(), svc)
	cfg := testkit.EdgeConfig(t, s.backend.URL, iss.URL())
	if change != nil {
		change(cfg)
	}
	s.edge = testkit.StartEdgeWith(t, cfg, testkit.EdgeOptions{
		Logger: testkit.Logger(s.edgeLog, "json", slog.LevelDebug), TracerProvider: tp,
	})
	s.iss = iss.URL()
	return s, func(who string) string { return testkit.Token(t, iss.URL(), who) }
}

// waitForSpan waits until a span called name has ended (the edge's server
// span ends after the client has its answer) and returns every span.
func (s *tracedStack) waitForSpan(t *testing.T, name string) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	testkit.WaitFor(t, "a span "+name, func() bool {
		spans = s.spans.GetSpans()
		return slices.ContainsFunc(spans, func(sp tracetest.SpanStub) bool { return sp.Name == name })
	})
	return spans
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name)
	}
	return names
}

// only returns the one span called name whose parent is parent (any parent
// when parent is invalid).
func only(t *testing.T, spans tracetest.SpanStubs, name string, parent trace.SpanContext) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, sp := range spans {
		if sp.Name == name && (!parent.IsValid() || sp.Parent.SpanID() == parent.SpanID()) {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q with parent %v, want 1; spans: %v", len(found), name, parent.SpanID(), spanNames(spans))
	}
	if parent.IsValid() && found[0].SpanContext.TraceID() != parent.TraceID() {
		t.Fatalf("span %q in trace %v, want %v", name, found[0].SpanContext.TraceID(), parent.TraceID())
	}
	return found[0]
}

func attr(sp tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func wantAttrs(t *testing.T, sp tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(sp, k).String(); got != v {
			t.Errorf("span %s: %s = %q, want %q", sp.Name, k, got, v)
		}
	}
}

// subjectOf reads the sub claim of a JWT, to check that no span names it.
func subjectOf(t *testing.T, token string) string {
	t.Helper()
	return testkit.Subject(t, token)
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

func TestAKeyedCallIsOneTraceFromTheClientsTraceparentThroughTheEdgeToTheBackendsStorage(t *testing.T) {
	t.Parallel()
	s, token := startTracedStack(t, orgsvc.Config{}, nil)
	tok := token("pro-traced")
	c := testkit.NewClients(s.edge.URL, testkit.ConnectProto, tok)
	r := req(&svcv1.CreateOrganizationRequest{Name: "traced", BillingEmail: "a@b.example"})
	r.Header().Set("Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	r.Header().Set("Idempotency-Key", "trace-1")
	if _, err := c.Org.CreateOrganization(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
	const procedure = "svc.v1.OrganizationService/CreateOrganization"
	spans := s.waitForSpan(t, procedure)

	// The edge's server span continues the client's trace.
	tid, _ := trace.TraceIDFromHex(clientTraceID)
	sid, _ := trace.SpanIDFromHex(clientSpanID)
	client := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true})
	server := only(t, spans, procedure, client)
	if server.SpanKind != trace.SpanKindServer || !server.Parent.IsRemote() {
		t.Errorf("edge span: kind %v, parent remote %v", server.SpanKind, server.Parent.IsRemote())
	}
	wantAttrs(t, server, map[string]string{
		"rpc.system": "connect_rpc", "rpc.service": "svc.v1.OrganizationService", "rpc.method": "CreateOrganization",
		"rpc.response.status_code": "OK", "http.response.status_code": "200", "edge.protocol": "connect",
	})

	// Its steps are its children; the idempotency step forwards the call.
	auth := only(t, spans, "edge.authenticate", server.SpanContext)
	wantAttrs(t, auth, map[string]string{"edge.auth.outcome": "ok"})
	limits := only(t, spans, "edge.limits", server.SpanContext)
	wantAttrs(t, limits, map[string]string{"edge.plan": "pro", "edge.limits.outcome": "allowed"})
	idem := only(t, spans, "edge.idempotency", server.SpanContext)
	wantAttrs(t, idem, map[string]string{"edge.idempotency.outcome": "first"})
	upstream := only(t, spans, "edge.upstream", idem.SpanContext)
	if upstream.SpanKind != trace.SpanKindClient {
		t.Errorf("upstream span kind %v", upstream.SpanKind)
	}
	wantAttrs(t, upstream, map[string]string{"http.response.status_code": "200", "rpc.method": "CreateOrganization"})

	// The backend's handler span is the upstream span's child, and storage
	// calls are the handler's.
	handler := only(t, spans, procedure, upstream.SpanContext)
	if handler.SpanKind != trace.SpanKindServer {
		t.Errorf("backend span kind %v", handler.SpanKind)
	}
	store := only(t, spans, "store.CreateOrganization", handler.SpanContext)
	wantAttrs(t, store, map[string]string{"db.system": "sqlite", "db.operation.name": "CreateOrganization"})

	// Spans name neither the token nor the subject.
	sub := subjectOf(t, tok)
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			if v := kv.Value.String(); strings.Contains(v, tok) || strings.Contains(v, sub) {
				t.Errorf("span %s attribute %s names the caller: %q", sp.Name, kv.Key, v)
			}
		}
	}

	// The access line names the trace.
	if !strings.Contains(s.edgeLog.String(), `"trace_id":"`+clientTraceID+`"`) {
		t.Errorf("access log lacks trace_id %s:\n%s", clientTraceID, s.edgeLog)
	}
}

func TestACallWithoutTraceparentStartsATraceAndRefusalsAreSpansToo(t *testing.T) {
	t.Parallel()
	s, token := startTracedStack(t, orgsvc.Config{}, nil)
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.GRPC, token("free-untraced"))
	if _, err := c.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatal(err)
	}
	const procedure = "svc.v1.OrganizationService/ListOrganizations"
	spans := s.waitForSpan(t, procedure)
	var server tracetest.SpanStub
	for _, sp := range spans {
		if sp.Name == procedure && !sp.Parent.IsValid() {
			server = sp
		}
	}
	if !server.SpanContext.IsValid() {
		t.Fatalf("no root span %s among %v", procedure, spanNames(spans))
	}
	wantAttrs(t, server, map[string]string{"rpc.system": "grpc", "edge.protocol": "grpc", "rpc.grpc.status_code": "0", "rpc.response.status_code": "OK"})
	// No key: the upstream span is the server span's own child.
	upstream := only(t, spans, "edge.upstream", server.SpanContext)
	only(t, spans, procedure, upstream.SpanContext)
	for _, sp := range spans {
		if sp.Name == "edge.idempotency" {
			t.Errorf("an idempotency span for a call without a key")
		}
	}

	// A refused call: the authenticate span says why, no upstream span.
	s.spans.Reset()
	bad := testkit.NewClients(s.edge.URL, testkit.GRPC, "not-a-token")
	if _, err := bad.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err == nil {
		t.Fatal("a call without a valid token passed")
	}
	spans = s.waitForSpan(t, procedure)
	server = only(t, spans, procedure, trace.SpanContext{})
	wantAttrs(t, server, map[string]string{"rpc.response.status_code": "UNAUTHENTICATED", "rpc.grpc.status_code": "16"})
	auth := only(t, spans, "edge.authenticate", server.SpanContext)
	wantAttrs(t, auth, map[string]string{"edge.auth.outcome": "unauthenticated", "edge.auth.reason": "TOKEN_INVALID"})
	if got := spanNames(spans); len(got) != 2 {
		t.Errorf("spans of a refused call: %v, want the server span and authenticate", got)
	}

	// A path that names no procedure.
	s.spans.Reset()
	res, err := testkit.HTTP1Client.Post(s.edge.URL+"/svc.v1.Nothing/Here", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	spans = s.waitForSpan(t, "edge.unknown")
	wantAttrs(t, spans[0], map[string]string{"rpc.response.status_code": "UNIMPLEMENTED", "rpc.system": "connect_rpc"})
	if v := attr(spans[0], "rpc.method"); v.Type() != attribute.EMPTY {
		t.Errorf("an unknown procedure's span names a method: %v", v.String())
	}
}

// With tracing off, the edge makes no span, and the client's trace context
// reaches the backend as the client sent it: the backend's span is the
// child of the client's.
func TestWithTracingOffTheClientsTraceparentReachesTheBackendUntouched(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	backendTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = backendTP.Shutdown(t.Context()) })
	iss := testkit.SharedIssuer(t)
	backend := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{TracerProvider: backendTP})
	edgeLog := &logBuffer{}
	e := testkit.StartEdgeWith(t, testkit.EdgeConfig(t, backend.URL, iss.URL()), testkit.EdgeOptions{
		Logger: testkit.Logger(edgeLog, "json", slog.LevelInfo), TracerProvider: noop.NewTracerProvider(),
	})
	c := testkit.NewClients(e.URL, testkit.ConnectJSON, testkit.Token(t, iss.URL(), "pro-untraced-edge"))
	r := req(&svcv1.ListOrganizationsRequest{})
	r.Header().Set("Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	if _, err := c.Org.ListOrganizations(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex(clientTraceID)
	sid, _ := trace.SpanIDFromHex(clientSpanID)
	client := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true})
	const procedure = "svc.v1.OrganizationService/ListOrganizations"
	spans := (&tracedStack{spans: exp}).waitForSpan(t, procedure) // the backend may end it after answering
	handler := only(t, spans, procedure, client)
	if !handler.Parent.IsRemote() {
		t.Errorf("backend span's parent is not the remote client span: %+v", handler.Parent)
	}
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "edge.") {
			t.Errorf("the edge made span %q with tracing off", sp.Name)
		}
	}
	if strings.Contains(edgeLog.String(), "trace_id") {
		t.Errorf("access log names a trace with tracing off:\n%s", edgeLog)
	}
}
