package edge_test

import (
	"net/http"
	"testing"

	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

const getUsage = "/svc.v1.UsageService/GetUsage"

// GetUsage is answered by the edge itself; its errors must reach a plain
// JSON caller in the same shape as the backend's and the edge's refusals:
// every detail with "@type" and the message's fields, no "debug".
func TestGetUsageErrorsReachJSONCallersInTheSpecShape(t *testing.T) {
	t.Parallel()
	rs := testkit.StartRedisServer(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Redis.Addr = rs.Addr // fail_open: the call is admitted, its usage cannot be read
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "alice")

	if res, body := jsonCall(t, e.URL, tok, getUsage, "{}"); res.StatusCode != http.StatusOK {
		t.Fatalf("GetUsage with Redis up: %d %v", res.StatusCode, body)
	}
	rs.Stop()
	res, body := jsonCall(t, e.URL, tok, getUsage, "{}")
	if res.StatusCode != http.StatusServiceUnavailable || body["code"] != "unavailable" {
		t.Fatalf("GetUsage with Redis down: %d %v, want 503 unavailable", res.StatusCode, body)
	}
	details, _ := body["details"].([]any)
	if len(details) != 1 {
		t.Fatalf("details %v, want one ErrorInfo", body["details"])
	}
	d, _ := details[0].(map[string]any)
	want := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "type": "google.rpc.ErrorInfo",
		"reason": "LIMITS_UNAVAILABLE", "domain": "edge"}
	for k, v := range want {
		if d[k] != v {
			t.Fatalf("detail %s = %v, want %v (detail %v)", k, d[k], v, d)
		}
	}
	if v, _ := d["value"].(string); v == "" {
		t.Fatalf("detail lost its Connect value: %v", d)
	}
	if _, ok := d["debug"]; ok {
		t.Fatalf("detail keeps connect-go's debug copy: %v", d)
	}
	if res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", res.Header.Get("Content-Type"))
	}
}
