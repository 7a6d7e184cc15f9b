package interop_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orgedge/edge/internal/testenv"
)

// The tools are given tokens through the environment (grpcurl) or a file
// (buf curl), not on the command line, where any process could read them.

// grpcurl runs grpcurl against the edge with token as the bearer token,
// for the call and for reflection alike.
func grpcurl(t *testing.T, bin, token string, args ...string) result {
	t.Helper()
	cmd := append([]string{"-plaintext", "-max-time", "30", "-expand-headers", "-H", "authorization: Bearer ${INTEROP_TOKEN}"}, args...)
	return runTool(t, []string{"INTEROP_TOKEN=" + token}, bin, cmd...)
}

// grpcurlStatus is google.rpc.Status as grpcurl -format json -format-error
// prints it.
type grpcurlStatus struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Details []grpcurlDetail `json:"details"`
}

// grpcurlDetail is an ErrorInfo or a RetryInfo, as grpcurl prints them.
type grpcurlDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"`
}

// TestGrpcurlListsDescribesAndCallsThroughTheEdge: grpcurl lists and
// describes the API by reflection through the edge, calls it with the
// schema from reflection or from a file, and reads a rate refusal.
func TestGrpcurlListsDescribesAndCallsThroughTheEdge(t *testing.T) {
	t.Parallel()
	bin := testenv.Command(t, "grpcurl")
	s := startStack(t, stackOptions{})
	addr := hostPort(s.edge.URL)
	pro := s.token(t, "pro-grpcurl")

	t.Run("list", func(t *testing.T) {
		r := grpcurl(t, bin, pro, addr, "list")
		got := strings.Fields(r.stdout)
		for _, svc := range []string{"svc.v1.OrganizationService", "svc.v1.EnvironmentService", "svc.v1.BlueprintService", "svc.v1.UsageService"} {
			if r.exit != 0 || !slices.Contains(got, svc) {
				t.Fatalf("grpcurl list: exit %d, listed %v, want %s\n%s", r.exit, got, svc, r.stderr)
			}
		}
	})
	t.Run("describe", func(t *testing.T) {
		r := grpcurl(t, bin, pro, addr, "describe", "svc.v1.EnvironmentService")
		const want = "rpc WatchEnvironment ( .svc.v1.WatchEnvironmentRequest ) returns ( stream .svc.v1.WatchEnvironmentResponse )"
		if r.exit != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("grpcurl describe: exit %d, want %q in\n%s\n%s", r.exit, want, r.stdout, r.stderr)
		}
	})
	t.Run("call", func(t *testing.T) {
		r := grpcurl(t, bin, pro, "-d", `{"name": "by-grpcurl", "billingEmail": "a@b.example"}`, addr, "svc.v1.OrganizationService/CreateOrganization")
		var org struct{ ID, Name string }
		if r.exit != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil || !strings.HasPrefix(org.ID, "org_") || org.Name != "by-grpcurl" {
			t.Fatalf("grpcurl CreateOrganization: exit %d, %+v\n%s\n%s", r.exit, org, r.stdout, r.stderr)
		}
	})
	t.Run("call-with-protoset", func(t *testing.T) {
		r := grpcurl(t, bin, pro, "-protoset", s.descriptors, "-d", `{"name": "by-grpcurl-protoset", "billingEmail": "a@b.example"}`,
			addr, "svc.v1.OrganizationService/CreateOrganization")
		var org struct{ ID, Name string }
		if r.exit != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil || org.Name != "by-grpcurl-protoset" {
			t.Fatalf("grpcurl -protoset CreateOrganization: exit %d, %+v\n%s\n%s", r.exit, org, r.stdout, r.stderr)
		}
	})
	t.Run("rate-refusal", func(t *testing.T) {
		free := s.token(t, "free-grpcurl")
		for call := 1; call <= freeBurst+5; call++ {
			r := grpcurl(t, bin, free, "-protoset", s.descriptors, "-format", "json", "-format-error",
				addr, "svc.v1.OrganizationService/ListOrganizations")
			if r.exit == 0 {
				continue
			}
			// -format-error prints the status on stderr, in the -format.
			var st grpcurlStatus
			if err := json.Unmarshal([]byte(r.stderr), &st); err != nil {
				t.Fatalf("call %d: exit %d, status %v\n%s\n%s", call, r.exit, err, r.stdout, r.stderr)
			}
			// grpcurl exits with 64 + the status code.
			if r.exit != 64+8 || st.Code != 8 || call <= freeBurst {
				t.Fatalf("call %d: exit %d, code %d (%s), want RESOURCE_EXHAUSTED (8) after %d calls", call, r.exit, st.Code, st.Message, freeBurst)
			}
			info := slices.ContainsFunc(st.Details, func(d grpcurlDetail) bool {
				return d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Reason == "RATE_LIMIT_EXCEEDED"
			})
			retry := slices.ContainsFunc(st.Details, func(d grpcurlDetail) bool {
				return d.Type == "type.googleapis.com/google.rpc.RetryInfo" && d.RetryDelay != ""
			})
			if !info || !retry {
				t.Fatalf("details %+v, want ErrorInfo RATE_LIMIT_EXCEEDED and a RetryInfo delay", st.Details)
			}
			return
		}
		t.Fatalf("%d calls of a free subject were all admitted", freeBurst+5)
	})
}

// TestBufCurlCallsThroughTheEdgeWithoutASchema: buf curl, which reads the
// schema by reflection through the edge, calls it in each protocol and
// reads a rate refusal.
func TestBufCurlCallsThroughTheEdgeWithoutASchema(t *testing.T) {
	t.Parallel()
	bin := testenv.Command(t, "buf")
	s := startStack(t, stackOptions{})
	headers := func(t *testing.T, who string) string {
		path := filepath.Join(t.TempDir(), "headers")
		if err := os.WriteFile(path, []byte("Authorization: Bearer "+s.token(t, who)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	curl := func(t *testing.T, headers, protocol, method, data string) result {
		return runTool(t, nil, bin, "curl", "--protocol", protocol, "--http2-prior-knowledge", "--timeout", "30s",
			"-H", "@"+headers, "--reflect-header", "*", "--data", data, s.edge.URL+"/"+method)
	}
	for _, protocol := range []string{"connect", "grpc", "grpcweb"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			h := headers(t, "pro-buf-"+protocol)
			r := curl(t, h, protocol, "svc.v1.OrganizationService/CreateOrganization", `{"name": "by-buf-`+protocol+`", "billingEmail": "a@b.example"}`)
			var org struct{ ID, Name string }
			if r.exit != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil || !strings.HasPrefix(org.ID, "org_") {
				t.Fatalf("buf curl CreateOrganization: exit %d, %+v\n%s\n%s", r.exit, org, r.stdout, r.stderr)
			}
			r = curl(t, h, protocol, "svc.v1.OrganizationService/ListOrganizations", `{}`)
			var list struct{ Organizations []struct{ ID string } }
			if r.exit != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Organizations) != 1 || list.Organizations[0].ID != org.ID {
				t.Fatalf("buf curl ListOrganizations: exit %d, %+v, want %s\n%s\n%s", r.exit, list, org.ID, r.stdout, r.stderr)
			}
		})
	}
	t.Run("rate-refusal", func(t *testing.T) {
		t.Parallel()
		h := headers(t, "free-buf")
		for call := 1; call <= freeBurst+5; call++ {
			r := curl(t, h, "grpc", "svc.v1.OrganizationService/ListOrganizations", `{}`)
			if r.exit == 0 {
				continue
			}
			// buf curl prints the error as Connect's JSON error.
			var e struct {
				Code    string
				Message string
				Details []struct{ Type string }
			}
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Code != "resource_exhausted" || call <= freeBurst {
				t.Fatalf("call %d: exit %d, %+v (%v), want resource_exhausted after %d calls\n%s", call, r.exit, e, err, freeBurst, r.stderr)
			}
			var types []string
			for _, d := range e.Details {
				types = append(types, d.Type)
			}
			if !slices.Contains(types, "google.rpc.ErrorInfo") || !slices.Contains(types, "google.rpc.RetryInfo") {
				t.Fatalf("details of types %v, want ErrorInfo and RetryInfo", types)
			}
			return
		}
		t.Fatalf("%d calls of a free subject were all admitted", freeBurst+5)
	})
}
