package edge_test

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
)

// startLoopedEdge starts an edge whose upstream leads back to itself: its
// upstream.url is a TCP proxy in front of it.
func startLoopedEdge(t *testing.T, issuer string, healthInterval time.Duration) (*testkit.Edge, *logBuffer) {
	t.Helper()
	front := testkit.StartFaultProxy(t, testkit.DeadAddr(t))
	cfg := testkit.EdgeConfig(t, "http://"+front.Addr, issuer)
	cfg.Upstream.HealthCheck.Interval, cfg.Upstream.HealthCheck.Timeout = healthInterval, healthInterval
	log := &logBuffer{}
	e := testkit.StartEdgeWith(t, cfg, testkit.EdgeOptions{Logger: testkit.Logger(log, "text", slog.LevelInfo)})
	front.Retarget(strings.TrimPrefix(e.URL, "http://"))
	return e, log
}

// An edge whose upstream leads back to itself answers the call that comes
// back with internal, reason FORWARDING_LOOP, which its first pass forwards
// to the client, and logs the loop as an error: each call makes two passes.
// Before, the edge forwarded a call to itself until the subject's rate
// limit ended the loop, and the answer, grown by every pass's headers,
// broke the client's header bound (grpc-js: RESOURCE_EXHAUSTED).
func TestAnEdgeWhoseUpstreamLeadsBackToItselfRefusesTheLoop(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	e, log := startLoopedEdge(t, iss.URL(), 0)
	tok := testkit.Token(t, iss.URL(), "pro-loop")

	protocols := []testkit.Protocol{testkit.HTTPJSON, testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb}
	for _, p := range protocols {
		_, err := testkit.NewClients(e.URL, p, tok).Org.ListOrganizations(ctxT(t), connect.NewRequest(&svcv1.ListOrganizationsRequest{}))
		wantError(t, err, connect.CodeInternal, "FORWARDING_LOOP", "edge")
	}
	m := testkit.ScrapeUntil(t, e.AdminURL+"/metrics", "both passes of each call recorded", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "ListOrganizations") >= float64(2*len(protocols))
	})
	if got := m.Sum("edge_requests_total", "method", "ListOrganizations"); got != float64(2*len(protocols)) {
		t.Errorf("edge_requests_total = %v, want %d: two passes of each call", got, 2*len(protocols))
	}
	if got := strings.Count(log.String(), "level=ERROR msg=\"forwarding loop"); got != len(protocols) {
		t.Errorf("%d forwarding loop errors logged, want %d:\n%s", got, len(protocols), log)
	}
}

// The edge's health checks of a backend that leads back to it come back to
// it too, and are refused as a loop, which the log says. (Whether the
// failed checks are logged with that reason depends on when the backend
// was first marked down: before the proxy in front pointed back at the
// edge, its checks failed for want of a backend.)
func TestAnEdgeWhoseUpstreamLeadsBackToItselfRefusesItsOwnHealthChecks(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	_, log := startLoopedEdge(t, iss.URL(), 50*time.Millisecond)
	refused := regexp.MustCompile(`level=ERROR msg="forwarding loop[^\n]* procedure=/grpc.health.v1.Health/Check`)
	testkit.WaitFor(t, "a health check refused as a loop, logged", func() bool { return refused.MatchString(log.String()) })
}
