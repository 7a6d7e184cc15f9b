package wire

import (
	"net/http"
	"strings"

	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// Protocol is the caller's wire protocol, as metrics and logs name it.
type Protocol string

// Protocols the edge serves.
const (
	Connect Protocol = "connect" // Connect unary or streaming, proto or JSON
	GRPC    Protocol = "grpc"
	GRPCWeb Protocol = "grpcweb"
	// HTTP is plain HTTP/JSON: a Connect unary JSON request sent without the
	// Connect-Protocol-Version header, as simple integrations (curl) do.
	HTTP Protocol = "http"
)

// Call is what the edge knows of a request before reading its body.
type Call struct {
	Protocol  Protocol
	Procedure string // "/svc.v1.OrganizationService/GetOrganization"
	Service   string // "svc.v1.OrganizationService"
	Method    string // "GetOrganization"
	// Streaming reports whether the procedure streams (from the API's
	// definition, not the request).
	Streaming bool
	// JSON reports whether messages are JSON rather than binary protobuf.
	JSON bool
	// UnaryConnect reports a Connect unary request (POST or GET), whose
	// errors are HTTP statuses with a JSON body.
	UnaryConnect bool
}

// Procedures maps every known procedure to whether it streams.
type Procedures map[string]bool

// Problem is why a request could not be classified.
type Problem int

// Problems, each answered differently.
const (
	// UnsupportedMediaType: no protocol has this content type (HTTP 415).
	UnsupportedMediaType Problem = iota + 1
	// MethodNotAllowed: neither POST nor a Connect GET (HTTP 405).
	MethodNotAllowed
	// UnknownProcedure: the protocol is known, the procedure is not
	// (unimplemented, in the caller's protocol).
	UnknownProcedure
)

// noFields are the procedures whose request has no fields.
var noFields = map[string]bool{svcv1connect.UsageServiceGetUsageProcedure: true}

// Bodiless reports a POST with no Content-Type and no body to a procedure
// whose request has no fields (GetUsage, whose row in the specification
// says "no body"): it is the empty request in HTTP/JSON, as HTTPie's
// plain `http POST URL` sends it. Anything else without a Content-Type is
// in no protocol: a body needs its media type to be read.
func Bodiless(r *http.Request) bool {
	return r.Method == http.MethodPost && len(r.Header["Content-Type"]) == 0 && r.ContentLength == 0 && noFields[r.URL.Path]
}

// maxPath bounds the path the classifier looks at.
const maxPath = 256

// Classify places a request. When the problem is UnknownProcedure, the
// returned Call still carries the protocol, so that the error can be
// written in it.
func Classify(r *http.Request, procs Procedures) (Call, Problem) {
	var c Call
	switch r.Method {
	case http.MethodPost:
		if Bodiless(r) {
			c.Protocol, c.UnaryConnect, c.JSON = HTTP, true, true
		} else if !c.fromContentType(r.Header) {
			return c, UnsupportedMediaType
		}
	case http.MethodGet:
		// Connect's GET form: ?connect=v1&encoding=json|proto&message=…
		q := r.URL.Query()
		if q.Get("connect") != "v1" {
			return c, MethodNotAllowed
		}
		switch q.Get("encoding") {
		case "json":
			c.JSON = true
		case "proto":
		default:
			return c, UnsupportedMediaType
		}
		c.Protocol, c.UnaryConnect = Connect, true
	default:
		return c, MethodNotAllowed
	}
	path := r.URL.Path
	if len(path) > maxPath {
		return c, UnknownProcedure
	}
	streaming, ok := procs[path]
	if !ok {
		return c, UnknownProcedure
	}
	c.Procedure, c.Streaming = path, streaming
	c.Service, c.Method, _ = strings.Cut(path[1:], "/")
	return c, 0
}

// fromContentType sets the protocol and codec from Content-Type.
func (c *Call) fromContentType(h http.Header) bool {
	m, ok := MediaOf(h)
	if !ok {
		return false
	}
	c.Protocol, c.JSON, c.UnaryConnect = m.Protocol, m.JSON, m.Unary
	if c.Protocol == HTTP && FirstValue(h["Connect-Protocol-Version"]) != "" {
		c.Protocol = Connect
	}
	return true
}
