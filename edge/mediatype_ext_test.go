package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestAnUppercaseGRPCContentTypeKeepsItsTrailersAndItsIdempotencyKey: media
// types are case-insensitive. A gRPC call sent as Application/GRPC+proto
// gets its grpc-status trailer, and a keyed one is kept and replayed (the
// proxy compared the type case-sensitively and dropped the trailers, so
// the key kept nothing).
func TestAnUppercaseGRPCContentTypeKeepsItsTrailersAndItsIdempotencyKey(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("pro-uppercase")
	call := func(procedure string, msg proto.Message, key string) (*http.Response, []byte) {
		t.Helper()
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.edge.URL+procedure, bytes.NewReader(testkit.Envelope(b)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "Application/GRPC+proto")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Authorization", "Bearer "+tok)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := testkit.H2CClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return res, body
	}
	status := func(res *http.Response) string {
		if s := res.Header.Get("Grpc-Status"); s != "" {
			return s
		}
		return res.Trailer.Get("Grpc-Status")
	}
	res, _ := call("/svc.v1.OrganizationService/ListOrganizations", &svcv1.ListOrganizationsRequest{}, "")
	if status(res) != "0" {
		t.Fatalf("grpc-status %q (trailers %v), want 0", status(res), res.Trailer)
	}
	create := &svcv1.CreateOrganizationRequest{Name: "uppercase", BillingEmail: "a@b.example"}
	first, body1 := call("/svc.v1.OrganizationService/CreateOrganization", create, "upper-1")
	retry, body2 := call("/svc.v1.OrganizationService/CreateOrganization", create, "upper-1")
	if status(first) != "0" || status(retry) != "0" || retry.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body1, body2) {
		t.Fatalf("first: grpc-status %q; retry: grpc-status %q, Idempotent-Replayed %q, same body %v; want the retry replayed",
			status(first), status(retry), retry.Header.Get("Idempotent-Replayed"), bytes.Equal(body1, body2))
	}
}
