package wire_test

import (
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orgedge/edge/edge/wire"
)

var procs = wire.Procedures{
	"/svc.v1.OrganizationService/GetOrganization":    false,
	"/svc.v1.EnvironmentService/WatchEnvironment":    true,
	"/svc.v1.OrganizationService/CreateOrganization": false,
}

func TestClassifyPlacesEveryProtocol(t *testing.T) {
	cases := []struct {
		name, method, target, contentType, connectVersion string
		want                                              wire.Call
		problem                                           wire.Problem
	}{
		{"PlainJSON", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json", "",
			wire.Call{Protocol: wire.HTTP, JSON: true, UnaryConnect: true}, 0},
		{"PlainJSONWithCharset", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json; charset=utf-8", "",
			wire.Call{Protocol: wire.HTTP, JSON: true, UnaryConnect: true}, 0},
		{"ConnectJSON", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json", "1",
			wire.Call{Protocol: wire.Connect, JSON: true, UnaryConnect: true}, 0},
		{"ConnectProto", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/proto", "1",
			wire.Call{Protocol: wire.Connect, UnaryConnect: true}, 0},
		{"ConnectGet", "GET", "/svc.v1.OrganizationService/GetOrganization?connect=v1&encoding=json&message=%7B%7D", "", "",
			wire.Call{Protocol: wire.Connect, JSON: true, UnaryConnect: true}, 0},
		{"ConnectStream", "POST", "/svc.v1.EnvironmentService/WatchEnvironment", "application/connect+proto", "1",
			wire.Call{Protocol: wire.Connect, Streaming: true}, 0},
		{"GRPC", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc", "",
			wire.Call{Protocol: wire.GRPC}, 0},
		{"GRPCJSON", "POST", "/svc.v1.EnvironmentService/WatchEnvironment", "application/grpc+json", "",
			wire.Call{Protocol: wire.GRPC, JSON: true, Streaming: true}, 0},
		{"GRPCWeb", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc-web+proto", "",
			wire.Call{Protocol: wire.GRPCWeb}, 0},
		{"GRPCWebText", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc-web-text", "",
			wire.Call{Protocol: wire.GRPCWeb}, 0},
		{"UnknownContentType", "POST", "/svc.v1.OrganizationService/GetOrganization", "text/plain", "", wire.Call{}, wire.UnsupportedMediaType},
		{"NoContentType", "POST", "/svc.v1.OrganizationService/GetOrganization", "", "", wire.Call{}, wire.UnsupportedMediaType},
		{"PlainGet", "GET", "/svc.v1.OrganizationService/GetOrganization", "", "", wire.Call{}, wire.MethodNotAllowed},
		{"GetBadEncoding", "GET", "/svc.v1.OrganizationService/GetOrganization?connect=v1&encoding=xml", "", "", wire.Call{}, wire.UnsupportedMediaType},
		{"Put", "PUT", "/svc.v1.OrganizationService/GetOrganization", "application/json", "", wire.Call{}, wire.MethodNotAllowed},
		{"UnknownProcedure", "POST", "/svc.v1.OrganizationService/Nope", "application/grpc", "",
			wire.Call{Protocol: wire.GRPC}, wire.UnknownProcedure},
		{"NotAProcedure", "POST", "/", "application/json", "",
			wire.Call{Protocol: wire.HTTP, JSON: true, UnaryConnect: true}, wire.UnknownProcedure},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, nil)
			if c.contentType != "" {
				r.Header.Set("Content-Type", c.contentType)
			}
			if c.connectVersion != "" {
				r.Header.Set("Connect-Protocol-Version", c.connectVersion)
			}
			got, problem := wire.Classify(r, procs)
			if problem != c.problem {
				t.Fatalf("problem %v, want %v", problem, c.problem)
			}
			want := c.want
			if problem == 0 {
				want.Procedure = r.URL.Path
				want.Service, want.Method, _ = strings.Cut(r.URL.Path[1:], "/")
			}
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("POST", "/svc.v1.OrganizationService/GetOrganization", "application/json", "")
	f.Add("GET", "/svc.v1.OrganizationService/GetOrganization", "", "connect=v1&encoding=proto")
	f.Add("POST", "/svc.v1.EnvironmentService/WatchEnvironment", "application/grpc-web-text+proto", "")
	f.Add("POST", "//", "application/json; charset=\"", "")
	f.Fuzz(func(t *testing.T, method, path, contentType, query string) {
		r := &http.Request{Method: method, Header: http.Header{"Content-Type": {contentType}}}
		r.URL = httptest.NewRequest("GET", "/", nil).URL
		r.URL.Path, r.URL.RawQuery = path, query
		c, problem := wire.Classify(r, procs)
		if problem != 0 {
			return
		}
		streaming, known := procs[c.Procedure]
		if !known || streaming != c.Streaming || c.Procedure != path {
			t.Fatalf("classified %q as %+v", path, c)
		}
		if c.Protocol == "" || "/"+c.Service+"/"+c.Method != c.Procedure {
			t.Fatalf("incomplete call %+v", c)
		}
	})
}

// TestMediaTypeReadsAsMimeDoes: the edge's one reading of a Content-Type
// gives what mime.ParseMediaType gives, with or without parameters, in any
// case, and refuses what it refuses (its fast path for the media types
// clients send must not differ).
func TestMediaTypeReadsAsMimeDoes(t *testing.T) {
	for _, ct := range []string{
		"application/json", "application/json; charset=utf-8", "Application/JSON", "application/json ",
		"application/proto", "application/connect+proto", "application/connect+json",
		"application/grpc", "application/grpc+proto", "application/grpc+json", "APPLICATION/GRPC",
		"application/grpc-web", "application/grpc-web+proto", "application/grpc-web+json",
		"application/grpc-web-text", "application/grpc-web-text+proto", "application/grpc-web-text+json",
		"text/plain", "", "application/", "application/json; charset", strings.Repeat("a", 129) + "/json",
	} {
		want, _, err := mime.ParseMediaType(ct)
		wantOK := err == nil && len(ct) <= 128
		got, ok := wire.MediaType(http.Header{"Content-Type": {ct}})
		if ok != wantOK || ok && got != want {
			t.Errorf("MediaType(%q) = %q, %v; want %q, %v", ct, got, ok, want, wantOK)
		}
	}
}
