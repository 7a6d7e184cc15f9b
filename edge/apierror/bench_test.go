package apierror_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
)

// BenchmarkWriteRateLimited writes a 429 with RetryInfo and ErrorInfo, the
// edge's most frequent refusal, in each protocol.
func BenchmarkWriteRateLimited(b *testing.B) {
	for _, ct := range []string{"application/json", "application/grpc", "application/grpc-web+proto"} {
		b.Run(ct, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/svc.v1.OrganizationService/ListOrganizations", nil)
			r.Header.Set("Content-Type", ct)
			b.ReportAllocs()
			for b.Loop() {
				err := apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "rate limit of the free plan exceeded",
					apierror.WithRetryAfter(time.Second), apierror.WithMetadata("limit", "plan"))
				apierror.Write(httptest.NewRecorder(), r, err)
			}
		})
	}
}

// BenchmarkRewriteJSON reshapes a backend's JSON error for a JSON caller.
func BenchmarkRewriteJSON(b *testing.B) {
	body := []byte(`{"code":"not_found","message":"organization not found","details":[{"type":"google.rpc.ErrorInfo","value":"ChZPUkdBTklaQVRJT05fTk9UX0ZPVU5EEhpzdmMudjEuT3JnYW5pemF0aW9uU2VydmljZQ"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := apierror.RewriteJSON(body); !ok {
			b.Fatal("not rewritten")
		}
	}
}
