package classify_test

import (
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orgedge/edge/edge/classify"
)

var procs = classify.Procedures{
	"/svc.v1.OrganizationService/GetOrganization":    false,
	"/svc.v1.EnvironmentService/WatchEnvironment":    true,
	"/svc.v1.OrganizationService/CreateOrganization": false,
}

func TestClassifyPlacesEveryProtocol(t *testing.T) {
	cases := []struct {
		name, method, target, contentType, connectVersion string
		want                                              classify.Call
		problem                                           classify.Problem
	}{
		{"PlainJSON", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json", "",
			classify.Call{Protocol: classify.HTTP, JSON: true, UnaryConnect: true}, 0},
		{"PlainJSONWithCharset", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json; charset=utf-8", "",
			classify.Call{Protocol: classify.HTTP, JSON: true, UnaryConnect: true}, 0},
		{"ConnectJSON", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/json", "1",
			classify.Call{Protocol: classify.Connect, JSON: true, UnaryConnect: true}, 0},
		{"ConnectProto", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/proto", "1",
			classify.Call{Protocol: classify.Connect, UnaryConnect: true}, 0},
		{"ConnectGet", "GET", "/svc.v1.OrganizationService/GetOrganization?connect=v1&encoding=json&message=%7B%7D", "", "",
			classify.Call{Protocol: classify.Connect, JSON: true, UnaryConnect: true}, 0},
		{"ConnectStream", "POST", "/svc.v1.EnvironmentService/WatchEnvironment", "application/connect+proto", "1",
			classify.Call{Protocol: classify.Connect, Streaming: true}, 0},
		{"GRPC", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc", "",
			classify.Call{Protocol: classify.GRPC}, 0},
		{"GRPCJSON", "POST", "/svc.v1.EnvironmentService/WatchEnvironment", "application/grpc+json", "",
			classify.Call{Protocol: classify.GRPC, JSON: true, Streaming: true}, 0},
		{"GRPCWeb", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc-web+proto", "",
			classify.Call{Protocol: classify.GRPCWeb}, 0},
		{"GRPCWebText", "POST", "/svc.v1.OrganizationService/GetOrganization", "application/grpc-web-text", "",
			classify.Call{Protocol: classify.GRPCWeb}, 0},
		{"UnknownContentType", "POST", "/svc.v1.OrganizationService/GetOrganization", "text/plain", "", classify.Call{}, classify.UnsupportedMediaType},
		{"NoContentType", "POST", "/svc.v1.OrganizationService/GetOrganization", "", "", classify.Call{}, classify.UnsupportedMediaType},
		{"PlainGet", "GET", "/svc.v1.OrganizationService/GetOrganization", "", "", classify.Call{}, classify.MethodNotAllowed},
		{"GetBadEncoding", "GET", "/svc.v1.OrganizationService/GetOrganization?connect=v1&encoding=xml", "", "", classify.Call{}, classify.UnsupportedMediaType},
		{"Put", "PUT", "/svc.v1.OrganizationService/GetOrganization", "application/json", "", classify.Call{}, classify.MethodNotAllowed},
		{"UnknownProcedure", "POST", "/svc.v1.OrganizationService/Nope", "application/grpc", "",
			classify.Call{Protocol: classify.GRPC}, classify.UnknownProcedure},
		{"NotAProcedure", "POST", "/", "application/json", "",
			classify.Call{Protocol: classify.HTTP, JSON: true, UnaryConnect: true}, classify.UnknownProcedure},
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
			got, problem := classify.Classify(r, procs)
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
		c, problem := classify.Classify(r, procs)
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
		got, ok := classify.MediaType(http.Header{"Content-Type": {ct}})
		if ok != wantOK || ok && got != want {
			t.Errorf("MediaType(%q) = %q, %v; want %q, %v", ct, got, ok, want, wantOK)
		}
	}
}
