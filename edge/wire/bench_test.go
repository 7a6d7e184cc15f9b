package wire_test

import (
	"net/http/httptest"
	"testing"

	"github.com/orgedge/edge/edge/wire"
)

func BenchmarkClassify(b *testing.B) {
	cases := []struct{ name, contentType string }{
		{"grpc", "application/grpc"},
		{"connect-json", "application/json"},
		{"grpc-web", "application/grpc-web+proto"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/svc.v1.OrganizationService/GetOrganization", nil)
			r.Header.Set("Content-Type", c.contentType)
			b.ReportAllocs()
			for b.Loop() {
				if _, p := wire.Classify(r, procs); p != 0 {
					b.Fatal(p)
				}
			}
		})
	}
}
