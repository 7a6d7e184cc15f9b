package apierror

import (
	"errors"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/edge/wire"
)

// errorWriter writes every protocol but unary JSON; it is safe for
// concurrent use.
var errorWriter = connect.NewErrorWriter()

// protocol is how an error must be written to a request.
type protocol int

const (
	unsupported protocol = iota
	unaryJSON            // Connect unary JSON or plain HTTP/JSON: our JSON body
	rpc                  // anything connect.ErrorWriter writes as it should
	grpc                 // gRPC: a Trailers-Only response, written here
	grpcWebText          // gRPC-Web text: a trailers-only response
)

func protocolOf(r *http.Request) protocol {
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet:
		// Connect's GET form; its errors are always JSON, and a caller that
		// asked for JSON messages reads the specification's shape.
		if r.URL.Query().Get("encoding") == "proto" {
			return rpc
		}
		return unaryJSON
	default:
		return unsupported
	}
	if wire.Bodiless(r) {
		return unaryJSON
	}
	m, ok := wire.MediaOf(r.Header)
	switch {
	case !ok:
		return unsupported
	case m.Text:
		return grpcWebText
	case m.Protocol == wire.HTTP:
		return unaryJSON
	case m.Protocol == wire.GRPC:
		return grpc
	}
	return rpc
}

// Write writes err in the protocol of r: the specification's JSON body with
// Connect's HTTP status for Connect unary JSON and plain HTTP/JSON callers
// (a GET included, unless it asked for proto), and connect-go's
// [connect.ErrorWriter] for the others. err.Meta() goes out as connect-go
// sends it: response headers for Connect unary and JSON callers (and
// gRPC-Web, whose error is trailers-only), trailers for gRPC and Connect
// streaming; none for a wire error (one received from an upstream), as
// connect-go's handlers do. A request in no protocol the edge serves gets
// 415 ([WriteUnsupportedMediaType]), or 405 for a method other than GET and
// POST. A nil err is written as internal.
//
// Write neither reads nor closes the request body, and must be called before
// anything else is written to w.
func Write(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if err == nil {
		err = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	switch protocolOf(r) {
	case unaryJSON:
		writeJSON(w, err)
	case rpc:
		_ = errorWriter.Write(w, r, err)
	case grpc:
		writeTrailersOnly(w, r, err)
	case grpcWebText:
		// A trailers-only response has no body, so it is the same in text
		// and binary gRPC-Web but for its Content-Type.
		ct := r.Header.Get("Content-Type")
		binary := r.Clone(r.Context())
		binary.Header.Set("Content-Type", "application/grpc-web")
		_ = errorWriter.Write(contentTypeWriter{w, ct}, binary, err)
	default:
		if r.Method == http.MethodPost {
			WriteUnsupportedMediaType(w)
		} else {
			WriteMethodNotAllowed(w)
		}
	}
}

// writeTrailersOnly writes a gRPC error as gRPC's Trailers-Only response:
// one HEADERS frame that ends the stream, carrying the status, its message
// and details, err.Meta(), and, when the error says when to retry (a
// RetryInfo), grpc-retry-pushback-ms equal to Retry-After. A client whose
// retry policy names the code retries it, and one that honours pushback
// waits as told: gRPC clients never retry a call whose response headers
// came apart from its status (connect-go's ErrorWriter sends the two
// frames apart).
func writeTrailersOnly(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	h := w.Header()
	for k, vs := range err.Meta() {
		h[k] = append(h[k], vs...)
	}
	for k, vs := range grpcTrailers(err) {
		h[k] = vs
	}
	if ms, ok := retryDelayMillis(err); ok {
		h.Set("Grpc-Retry-Pushback-Ms", strconv.FormatInt(ms, 10))
	}
	h.Set("Content-Type", r.Header.Get("Content-Type"))
	// No body and no declared trailers: net/http's HTTP/2 server sends the
	// header block with END_STREAM.
	w.WriteHeader(http.StatusOK)
}

// retryDelayMillis is the delay of err's RetryInfo detail in milliseconds.
func retryDelayMillis(err *connect.Error) (int64, bool) {
	for _, d := range err.Details() {
		v, verr := d.Value()
		if ri, ok := v.(*errdetails.RetryInfo); verr == nil && ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration().Milliseconds(), true
		}
	}
	return 0, false
}

// WriteUnsupportedMediaType answers a request whose Content-Type names no
// protocol the edge serves, with the status and header the Connect and gRPC
// specifications say and connect-go's handler sends: 415 Unsupported Media
// Type and an Accept-Post header listing the content types served. Unlike
// connect-go's, the answer has a body: the specification's JSON error
// (invalid_argument, reason UNSUPPORTED_MEDIA_TYPE), since every error of
// the API carries one ErrorInfo, and a caller in no protocol reads JSON if
// anything.
func WriteUnsupportedMediaType(w http.ResponseWriter) {
	w.Header().Set("Accept-Post", wire.AcceptPost())
	writeStatic(w, http.StatusUnsupportedMediaType, unsupportedMediaTypeBody)
}

// WriteMethodNotAllowed answers a request with a method other than POST and
// Connect's GET, as connect-go's handler does (405 Method Not Allowed, an
// Allow header), with the specification's JSON error (invalid_argument,
// reason METHOD_NOT_ALLOWED) as its body.
func WriteMethodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Allow", "GET, POST")
	writeStatic(w, http.StatusMethodNotAllowed, methodNotAllowedBody)
}

var (
	unsupportedMediaTypeBody = marshalError(New(connect.CodeInvalidArgument, ReasonUnsupportedMediaType,
		"the Content-Type names no protocol this API serves: send JSON as application/json (Accept-Post lists the others)"))
	methodNotAllowedBody = marshalError(New(connect.CodeInvalidArgument, ReasonMethodNotAllowed,
		"a procedure is called with POST (or Connect's GET form)"))
)

func writeStatic(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentTypeWriter sets Content-Type just before the status goes out,
// replacing what connect.ErrorWriter set.
type contentTypeWriter struct {
	http.ResponseWriter
	contentType string
}

func (w contentTypeWriter) WriteHeader(status int) {
	w.Header().Set("Content-Type", w.contentType)
	w.ResponseWriter.WriteHeader(status)
}

func writeJSON(w http.ResponseWriter, err *connect.Error) {
	h := w.Header()
	if !connect.IsWireError(err) {
		for key, values := range err.Meta() {
			if _, isProtocol := protocolHeaders[http.CanonicalHeaderKey(key)]; !isProtocol && len(values) > 0 {
				h[key] = append(h[key], values...)
			}
		}
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(err.Code()))
	_, _ = w.Write(marshalError(err))
}

// marshalError returns the specification's JSON body for err: the bytes
// object.marshal writes for its code, message and details, appended in one
// buffer (each part is already compact).
func marshalError(err *connect.Error) []byte {
	ds := err.Details()
	details := make([][]byte, len(ds))
	size := 64 + len(err.Message())
	for i, d := range ds {
		details[i] = detailJSONOf(d.Type(), d.Bytes())
		size += len(details[i]) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"code":`...)
	b = append(b, quote(err.Code().String())...)
	b = append(b, `,"message":`...)
	b = append(b, quote(err.Message())...)
	if len(ds) > 0 {
		b = append(b, `,"details":[`...)
		for i, d := range details {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, d...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// httpStatus is connect-go's connectCodeToHTTP (protocol_connect.go,
// v1.21.1), the Connect protocol's mapping of codes to HTTP statuses; a test
// holds it to connect.ErrorWriter for every code.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeCanceled:
		return 499
	case connect.CodeUnknown:
		return 500
	case connect.CodeInvalidArgument:
		return 400
	case connect.CodeDeadlineExceeded:
		return 504
	case connect.CodeNotFound:
		return 404
	case connect.CodeAlreadyExists:
		return 409
	case connect.CodePermissionDenied:
		return 403
	case connect.CodeResourceExhausted:
		return 429
	case connect.CodeFailedPrecondition:
		return 400
	case connect.CodeAborted:
		return 409
	case connect.CodeOutOfRange:
		return 400
	case connect.CodeUnimplemented:
		return 501
	case connect.CodeInternal:
		return 500
	case connect.CodeUnavailable:
		return 503
	case connect.CodeDataLoss:
		return 500
	case connect.CodeUnauthenticated:
		return 401
	default:
		return 500
	}
}

// protocolHeaders are the headers error metadata may not set; connect-go's
// list (header.go, v1.21.1).
var protocolHeaders = map[string]struct{}{
	"Content-Type":             {},
	"Content-Length":           {},
	"Content-Encoding":         {},
	"Host":                     {},
	"User-Agent":               {},
	"Trailer":                  {},
	"Date":                     {},
	"Accept-Encoding":          {},
	"Trailer-":                 {},
	"Connect-Content-Encoding": {},
	"Connect-Accept-Encoding":  {},
	"Connect-Timeout-Ms":       {},
	"Connect-Protocol-Version": {},
	"Grpc-Encoding":            {},
	"Grpc-Accept-Encoding":     {},
	"Grpc-Timeout":             {},
	"Grpc-Status":              {},
	"Grpc-Message":             {},
	"Grpc-Status-Details-Bin":  {},
}
