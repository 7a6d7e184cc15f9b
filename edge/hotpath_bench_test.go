package edge

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/identity"
)

// The hot path's steps that live in this package, one benchmark each, so
// that a regression shows in benchstat (docs/benchmarks.md). The others:
// classify.BenchmarkClassify, authn.BenchmarkCachedToken,
// limits.BenchmarkRateLimitHeaders, observe.BenchmarkMetrics,
// ratelimit.BenchmarkAllowRealRedis, proxy.BenchmarkProxyHop.

var benchCall = classify.Call{
	Protocol: classify.HTTP, Procedure: "/svc.v1.OrganizationService/GetOrganization",
	Service: "svc.v1.OrganizationService", Method: "GetOrganization", JSON: true, UnaryConnect: true,
}

// BenchmarkAccessLog writes one access line (JSON, as in production) into
// the buffered log writer.
func BenchmarkAccessLog(b *testing.B) {
	logs := observe.NewLogWriter(io.Discard, 0)
	defer logs.Close()
	cfg := config.Default()
	s := &Server{cfg: cfg, log: slog.New(slog.NewJSONHandler(logs, nil))}
	r := httptest.NewRequest("POST", benchCall.Procedure, nil)
	r.Header.Set("X-Request-Id", "0123456789abcdef0123456789abcdef")
	p := &identity.Principal{Subject: "bench-subject", Plan: "enterprise"}
	p.SubjectSum[0] = 1
	rec := &recorder{status: http.StatusOK}
	b.ReportAllocs()
	for b.Loop() {
		s.logCall(r, benchCall, p, rec, "ok", time.Millisecond)
	}
}

// BenchmarkRequestID makes a request id for a call that brings none.
func BenchmarkRequestID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if requestID("") == "" {
			b.Fatal("no id")
		}
	}
}
