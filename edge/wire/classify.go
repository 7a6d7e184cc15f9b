package wire

import (
	"mime"
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
	return r.Method == http.MethodPost && len(r.Header.Values("Content-Type")) == 0 && r.ContentLength == 0 && noFields[r.URL.Path]
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

// MediaType is the media type of h's Content-Type, lower case and without
// its parameters; ok is false when it is missing, longer than 128 bytes (no
// media type of this API is) or malformed. It is the edge's one reading of
// a Content-Type: a request's (the chain, the refusal's protocol, the
// idempotency fingerprint, the operator API) and an answer's (the end of a
// stream the edge cuts).
func MediaType(h http.Header) (mt string, ok bool) {
	ct := h.Get("Content-Type")
	if plain(ct) {
		// What clients send, as ParseMediaType would return it, without
		// its lowering and parameter map (4,000 instructions a call).
		return ct, true
	}
	if len(ct) > 128 {
		return "", false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return mt, err == nil
}

// plain reports whether ct is a media type of this API written as
// MediaType returns it: lower case, no parameters.
func plain(ct string) bool {
	switch ct {
	case "application/json", "application/proto", "application/connect+proto", "application/connect+json",
		"application/grpc", "application/grpc+proto", "application/grpc+json",
		"application/grpc-web", "application/grpc-web+proto", "application/grpc-web+json",
		"application/grpc-web-text", "application/grpc-web-text+proto", "application/grpc-web-text+json":
		return true
	}
	return false
}

// fromContentType sets the protocol and codec from Content-Type.
func (c *Call) fromContentType(h http.Header) bool {
	mt, ok := MediaType(h)
	if !ok {
		return false
	}
	switch mt {
	case "application/grpc", "application/grpc+proto":
		c.Protocol = GRPC
	case "application/grpc+json":
		c.Protocol, c.JSON = GRPC, true
	case "application/grpc-web", "application/grpc-web+proto", "application/grpc-web-text", "application/grpc-web-text+proto":
		c.Protocol = GRPCWeb
	case "application/grpc-web+json", "application/grpc-web-text+json":
		c.Protocol, c.JSON = GRPCWeb, true
	case "application/connect+proto":
		c.Protocol = Connect
	case "application/connect+json":
		c.Protocol, c.JSON = Connect, true
	case "application/proto":
		c.Protocol, c.UnaryConnect = Connect, true
	case "application/json":
		c.Protocol, c.UnaryConnect, c.JSON = HTTP, true, true
		if h.Get("Connect-Protocol-Version") != "" {
			c.Protocol = Connect
		}
	default:
		return false
	}
	return true
}
