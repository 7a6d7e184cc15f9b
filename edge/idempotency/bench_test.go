package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/internal/testenv"
)

// BenchmarkReplay is a duplicate answered from Redis: the lookup and the
// byte-for-byte replay, no backend.
func BenchmarkReplay(b *testing.B) {
	step := idempotency.New(testenv.Redis(b), idempotency.Options{Timeout: time.Second, KeyPrefix: testenv.Unique("bench") + ":"})
	backend := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"org_1","name":"acme"}`))
	})
	call := wire.Call{Protocol: wire.HTTP, Procedure: "/svc.v1.OrganizationService/CreateOrganization",
		Service: "svc.v1.OrganizationService", Method: "CreateOrganization", JSON: true, UnaryConnect: true}
	send := func() (idempotency.Outcome, *httptest.ResponseRecorder) {
		r := httptest.NewRequest("POST", call.Procedure, strings.NewReader(`{"name":"acme"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderKey, "bench-key")
		w := httptest.NewRecorder()
		o, _ := step.Serve(w, r, call, "bench-subject", true, false, backend)
		return o, w
	}
	if o, _ := send(); o != idempotency.First {
		b.Fatalf("first call: %s", o)
	}
	b.ReportAllocs()
	for b.Loop() {
		if o, w := send(); o != idempotency.Replayed || w.Code != http.StatusOK {
			b.Fatalf("duplicate: %s %d", o, w.Code)
		}
	}
}
