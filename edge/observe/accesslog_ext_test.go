package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/logformat"
)

// The edge's own logger (logformat.New) writes the access line without
// slog's Record; any other logger gets it through slog. Both lines are the
// same but for their time: the same fields, in the same order, hostile
// request IDs and an unknown path included, in JSON and in text.
func TestAccessLineIsTheSameThroughTheEdgesLoggerAndAnyOther(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	getOrg := wire.Call{Protocol: wire.Connect, Procedure: "/svc.v1.OrganizationService/GetOrganization"}
	cases := []struct {
		name      string
		c         wire.Call
		path, rid string
		p         *identity.Principal
		held      time.Duration
		traced    bool
	}{
		{name: "plain", c: getOrg, rid: "0123456789abcdef"},
		{name: "every field", c: getOrg, rid: "r-1", p: &identity.Principal{Subject: "alice", Plan: "enterprise"}, held: 1500 * time.Microsecond, traced: true},
		{name: "hostile request id", c: getOrg, rid: "a=b \"c\"\\ \x01 caf\u00e9 \xff \u2028"},
		{name: "no request id", c: getOrg},
		{name: "unknown path", c: wire.Call{Protocol: wire.HTTP}, path: "/nowhere/" + string(make([]byte, 300))},
	}
	stamp := regexp.MustCompile(`^(\{"time":"[^"]*"|time=\S+)`)
	for _, tc := range cases {
		for _, format := range []string{"json", "text"} {
			var fast, other bytes.Buffer
			edgeLog, err := logformat.New(&fast, format, slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			var h slog.Handler = slog.NewTextHandler(&other, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&other, &slog.HandlerOptions{ReplaceAttr: logformat.ReplaceAttr})
			}
			path := tc.c.Procedure
			if tc.path != "" {
				path = "/nowhere"
			}
			r := httptest.NewRequest(http.MethodPost, path, nil)
			if tc.path != "" {
				r.URL.Path = tc.path
			}
			if tc.rid != "" {
				r.Header.Set("X-Request-Id", tc.rid)
			}
			if tc.traced {
				ctx, span := tp.Tracer("t").Start(r.Context(), "call")
				defer span.End()
				r = r.WithContext(ctx)
			}
			rec := call.NewRecorder(httptest.NewRecorder(), tc.c)
			rec.WriteHeader(http.StatusTooManyRequests)
			rec.AddHeld(tc.held)
			for _, log := range []*slog.Logger{edgeLog, slog.New(h)} {
				observe.AccessLog{Log: log, SampleOK: 1}.Write(r, tc.c, tc.p, rec, "resource_exhausted", call.OutcomeRefused, 2345*time.Microsecond)
			}
			got, want := stamp.ReplaceAllString(fast.String(), ""), stamp.ReplaceAllString(other.String(), "")
			if got != want || got == "" {
				t.Errorf("%s, %s:\nedge's logger: %s\nslog:          %s", tc.name, format, fast.String(), other.String())
			}
			if format == "json" {
				var line map[string]any
				if err := json.Unmarshal(fast.Bytes(), &line); err != nil {
					t.Errorf("%s: not JSON: %v: %s", tc.name, err, fast.String())
				}
				if line["code"] != "resource_exhausted" || line["duration_ms"] != 2.345 || line["http_status"] != 429.0 ||
					(tc.traced && len(line["trace_id"].(string)) != 32) || (tc.p != nil && line["plan"] != "enterprise") {
					t.Errorf("%s: line %v", tc.name, line)
				}
			}
		}
	}
}
