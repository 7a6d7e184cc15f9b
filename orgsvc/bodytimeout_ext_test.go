package orgsvc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// The backend bounds a request body on its own (a caller that reaches it
// straight, or an edge forwarding a slow client): part of a body and then
// nothing ends with deadline_exceeded (REQUEST_BODY_TIMEOUT) in the
// caller's protocol, over HTTP/1.1 and HTTP/2, and the whole body sent
// promptly still works.
func TestASlowBodyAtTheBackendIsDeadlineExceeded(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{BodyTimeout: 300 * time.Millisecond})
	tok := testkit.Token(t, iss.URL(), "alice")
	msg, err := proto.Marshal(&svcv1.CreateOrganizationRequest{Name: "slow-at-the-backend", BillingEmail: "a@b.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		hc     *http.Client
		ct     string
		header http.Header
		body   []byte
	}{
		{"http1-connect-json", testkit.HTTP1Client, "application/json", http.Header{"Connect-Protocol-Version": {"1"}},
			[]byte(`{"name":"slow-at-the-backend-json","billingEmail":"a@b.example"}`)},
		{"h2-grpc", testkit.H2CClient, "application/grpc", http.Header{"Te": {"trailers"}}, testkit.Envelope(msg)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tc.header.Set("Authorization", "Bearer "+tok)
			url := be.URL + "/svc.v1.OrganizationService/CreateOrganization"
			got, err := testkit.RawCall(ctx, tc.hc, url, tc.ct, tc.header, tc.body[:len(tc.body)/2], testkit.Stalled)
			if err != nil {
				t.Fatal(err)
			}
			if got.Code != "deadline_exceeded" || got.Reason != "REQUEST_BODY_TIMEOUT" {
				t.Fatalf("a stalled body got %v, want deadline_exceeded REQUEST_BODY_TIMEOUT", got)
			}
			if got, err := testkit.RawCall(ctx, tc.hc, url, tc.ct, tc.header, tc.body, testkit.Sized); err != nil || got.Code != "ok" {
				t.Fatalf("the whole body got %v (%v), want ok", got, err)
			}
		})
	}
}
