package edge_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestGetUsageDuringARedisOutageIsCountedUnavailableForLimits: gRPC and
// gRPC-Web callers of GetUsage get unavailable while Redis is down, and the
// edge counts and logs what they got: code unavailable, the HTTP status
// sent (200: gRPC's status is in its trailers), reason limits. Before,
// connect-go's trailers-only answer, sent with a flush and no WriteHeader,
// was recorded as no answer at all: code unknown, http_status 0.
func TestGetUsageDuringARedisOutageIsCountedUnavailableForLimits(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr // fail_open: the call is admitted, its usage cannot be read
	cfg.Redis.Timeout = outageTimeout
	log := &logBuffer{}
	e := testkit.StartEdgeWith(t, cfg, testkit.EdgeOptions{Logger: testkit.Logger(log, "json", slog.LevelInfo)})
	tok := testkit.Token(t, iss.URL(), "pro-usage-outage")
	rs.Stop()

	protocols := []testkit.Protocol{testkit.GRPC, testkit.GRPCWeb}
	for _, p := range protocols {
		_, err := testkit.NewClients(e.URL, p, tok).Usage.GetUsage(ctxT(t), req(&svcv1.GetUsageRequest{}))
		wantError(t, err, connect.CodeUnavailable, "LIMITS_UNAVAILABLE", "edge")
	}
	m := testkit.Scrape(t, e.AdminURL+"/metrics")
	for _, p := range []string{"grpc", "grpcweb"} {
		if n := m.Sum("edge_requests_total", "method", "GetUsage", "protocol", p, "code", "unavailable"); n != 1 {
			t.Errorf("edge_requests_total{method=GetUsage,protocol=%s,code=unavailable} %v, want 1", p, n)
		}
	}
	if n := m.Sum("edge_requests_total", "method", "GetUsage", "code", "unknown"); n != 0 {
		t.Errorf("edge_requests_total{method=GetUsage,code=unknown} %v, want 0", n)
	}
	if n := m.Sum("edge_unavailable_total", "reason", "limits"); n != 2 {
		t.Errorf(`edge_unavailable_total{reason="limits"} %v, want 2`, n)
	}
	testkit.WaitFor(t, "an access line per call", func() bool { return strings.Count(log.String(), `"msg":"call"`) >= 2 })
	for _, line := range strings.Split(log.String(), "\n") {
		if !strings.Contains(line, `"msg":"call"`) {
			continue
		}
		var access struct {
			Code       string `json:"code"`
			HTTPStatus int    `json:"http_status"`
		}
		if err := json.Unmarshal([]byte(line), &access); err != nil {
			t.Fatal(err)
		}
		if access.Code != "unavailable" || access.HTTPStatus != http.StatusOK {
			t.Errorf("access line code %q http_status %d, want unavailable 200: %s", access.Code, access.HTTPStatus, line)
		}
	}
}
