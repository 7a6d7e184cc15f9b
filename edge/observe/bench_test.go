package observe

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/classify"
)

var benchCall = classify.Call{
	Protocol: classify.HTTP, Procedure: "/svc.v1.OrganizationService/GetOrganization",
	Service: "svc.v1.OrganizationService", Method: "GetOrganization", JSON: true, UnaryConnect: true,
}

// BenchmarkMetrics is what every forwarded call records: the request
// counter and duration, the upstream duration, the limit decision.
func BenchmarkMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry(), nil, nil, "bench")
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(benchCall, "ok", OutcomeForwarded, time.Millisecond)
		m.Overhead(benchCall, 100*time.Microsecond)
		m.Forwarded(benchCall, time.Millisecond)
		m.Decided("enterprise", "rate", true)
	}
}
