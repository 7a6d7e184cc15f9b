package observe

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/logformat"
)

var benchCall = wire.Call{
	Protocol: wire.HTTP, Procedure: "/svc.v1.OrganizationService/GetOrganization",
	Service: "svc.v1.OrganizationService", Method: "GetOrganization", JSON: true, UnaryConnect: true,
}

// BenchmarkMetrics is what every forwarded call records: the request
// counter and duration, the upstream duration, the limit decision.
func BenchmarkMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry(), nil, nil, "bench")
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(benchCall, "ok", call.OutcomeForwarded, time.Millisecond)
		m.Overhead(benchCall, 100*time.Microsecond)
		m.Forwarded(benchCall, time.Millisecond)
		m.Decided("enterprise", "rate", true)
	}
}

// BenchmarkAccessLog writes one access line into the buffered log writer:
// through the edge's own logger (logformat.Line), in JSON as in production
// and in text as in the development mode, and through slog.
func BenchmarkAccessLog(b *testing.B) {
	for _, format := range []string{"json", "text", "slog"} {
		b.Run(format, func(b *testing.B) { benchAccessLog(b, format) })
	}
}

func benchAccessLog(b *testing.B, format string) {
	logs := NewLogWriter(io.Discard, 0)
	defer logs.Close()
	log := slog.New(slog.NewJSONHandler(logs, nil))
	if format != "slog" {
		log, _ = logformat.New(logs, format, slog.LevelInfo)
	}
	a := AccessLog{Log: log, SampleOK: 1}
	r := httptest.NewRequest("POST", benchCall.Procedure, nil)
	r.Header.Set("X-Request-Id", "0123456789abcdef0123456789abcdef")
	p := &identity.Principal{Subject: "bench-subject", Plan: "enterprise"}
	p.SumSubject() // as authn does, once per token
	rec := call.NewRecorder(httptest.NewRecorder(), benchCall)
	rec.WriteHeader(http.StatusOK)
	b.ReportAllocs()
	for b.Loop() {
		a.Write(r, benchCall, p, rec, "ok", call.OutcomeForwarded, time.Millisecond)
	}
}
