package wire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"

	"connectrpc.com/connect"
)

// Answer is what a call's result is read from: the answer as it went to the
// client.
type Answer struct {
	Status int
	// Header is the answer's header as the status went out; it carries
	// grpc-status in a trailers-only gRPC or gRPC-Web answer.
	Header http.Header
	// Trailer is a gRPC answer's trailers, declared or set with
	// http.TrailerPrefix (a ResponseWriter's header map after the body
	// serves as both).
	Trailer http.Header
	// Frames followed the body of a gRPC-Web answer or a Connect stream
	// (see NewFrames).
	Frames *Frames
	// Body is a Connect unary or HTTP/JSON answer's error body, when kept
	// whole; BodyOver: it was too large to keep.
	Body     []byte
	BodyOver bool
	// Written counts the body bytes written, to tell a unary answer cut
	// short of its Content-Length.
	Written int64
}

// Ending is how much an answer tells of the call's end.
type Ending int

const (
	Whole      Ending = iota // the code is known from a whole answer
	CutShort                 // the answer is not whole, or ends without a status
	Unknowable               // the answer is whole, but its status is in a body too large to keep
)

// OK is success: connect-go has no name for it; gRPC's status is 0.
const OK connect.Code = 0

// CodeName is a code's name as metrics, logs and spans show it: "ok" for
// OK, else connect-go's name ("permission_denied").
func CodeName(c connect.Code) string {
	if c == OK {
		return "ok"
	}
	return c.String()
}

// NewFrames returns what follows the body of c's answer for Of: the
// envelopes of a gRPC-Web answer (its trailers frame) or of a Connect
// stream (its end-of-stream message); nil for the protocols whose result
// is in the HTTP status or trailers.
func NewFrames(c Call) *Frames {
	switch {
	case c.Protocol == GRPCWeb:
		return &Frames{End: FlagTrailer}
	case c.Protocol == Connect && c.Streaming:
		return &Frames{End: FlagEndStream}
	}
	return nil
}

// Reading is what Of read of an answer: its code, meaningful when the
// ending is Whole.
type Reading struct {
	Code   connect.Code
	Ending Ending
}

// Reads counts the answers Of has read in this process. The chain reads
// each call's answer once, whichever steps need its result (the call's
// record, the idempotency capture, the limits that watch an answer): a test
// counts them (TestEachAnswerIsReadOncePerCall), and a debugger can.
var Reads atomic.Uint64

// OfResponse reads the answer res of a unary call c, its body read whole
// into body (to EOF, so that gRPC trailers are in res.Trailer): Of, for a
// step that holds the whole answer before it goes out.
func OfResponse(c Call, res *http.Response, body []byte) Reading {
	a := Answer{Status: res.StatusCode, Header: res.Header, Trailer: res.Trailer, Written: int64(len(body))}
	if a.Frames = NewFrames(c); a.Frames != nil {
		a.Frames.Feed(body)
	} else if res.StatusCode != http.StatusOK {
		a.Body = body
	}
	code, ending := Of(c, a)
	return Reading{Code: code, Ending: ending}
}

// Of is the one reading of a call's result, for every protocol, unary
// or streaming, compressed or not: grpc-status from the trailers (gRPC),
// the headers of a trailers-only answer, or the trailers frame (gRPC-Web);
// the end-of-stream message (Connect streams); the error body's code
// (Connect unary, HTTP/JSON), else the HTTP status as Connect clients map
// it. The code is meaningful when the ending is Whole.
func Of(c Call, a Answer) (connect.Code, Ending) {
	Reads.Add(1)
	if a.Status == 0 {
		return 0, CutShort
	}
	switch {
	case c.Protocol == GRPC:
		s := FirstValue(a.Trailer["Grpc-Status"])
		if s == "" {
			// Trailers a handler set without declaring them first.
			s = a.Trailer.Get(http.TrailerPrefix + "Grpc-Status")
		}
		if s == "" {
			s = FirstValue(a.Header["Grpc-Status"]) // trailers-only
		}
		if s == "" && a.Status != http.StatusOK {
			return HTTPCode(a.Status), Whole
		}
		return grpcCode(s)
	case c.Protocol == GRPCWeb:
		if s := FirstValue(a.Header["Grpc-Status"]); s != "" {
			return grpcCode(s) // trailers-only
		}
		payload, code, end, ok := endFrame(a, "Grpc-Encoding")
		if !ok {
			return code, end
		}
		return grpcCode(Trailer(payload).Get("Grpc-Status"))
	case c.Protocol == Connect && c.Streaming:
		payload, code, ending, ok := endFrame(a, "Connect-Content-Encoding")
		if !ok {
			return code, ending
		}
		var end struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(payload, &end) != nil {
			return 0, CutShort
		}
		if end.Error == nil {
			return OK, Whole
		}
		return codeOf(end.Error.Code), Whole
	}
	// Connect unary and plain HTTP/JSON: the status, and the body's code
	// when it is an error.
	if cl := FirstValue(a.Header["Content-Length"]); cl != "" && cl != strconv.FormatInt(a.Written, 10) {
		return 0, CutShort
	}
	if a.Status == http.StatusOK {
		return OK, Whole
	}
	if a.BodyOver {
		return 0, Unknowable
	}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(a.Body, &e) == nil && e.Code != "" {
		return codeOf(e.Code), Whole
	}
	// An error without a Connect body (a 502 from something in between).
	return HTTPCode(a.Status), Whole
}

// endFrame is the end frame of a framed answer (gRPC-Web, a Connect
// stream), decompressed in the encoding its header names. When ok is false
// the answer says no more than code and ending: an HTTP error, or no whole
// end frame (cut short).
func endFrame(a Answer, encodingHeader string) (payload []byte, code connect.Code, ending Ending, ok bool) {
	if a.Status != http.StatusOK {
		return nil, HTTPCode(a.Status), Whole, false
	}
	if a.Frames == nil {
		return nil, 0, CutShort, false
	}
	payload, ok = a.Frames.EndFrame(a.Header.Get(encodingHeader))
	if !ok {
		return nil, 0, CutShort, false
	}
	return payload, 0, Whole, true
}

// codeOf reads a Connect code name; one it does not know is unknown, as a
// Connect client reads it.
func codeOf(name string) connect.Code {
	var code connect.Code
	if code.UnmarshalText([]byte(name)) != nil {
		return connect.CodeUnknown
	}
	return code
}

func grpcCode(s string) (connect.Code, Ending) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 16 || len(s) > 2 {
		return 0, CutShort
	}
	return connect.Code(n), Whole
}

// HTTPCode maps an HTTP status to a code as Connect clients do.
func HTTPCode(status int) connect.Code {
	switch status {
	case 0, http.StatusOK:
		return OK
	case http.StatusBadRequest:
		return connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		return connect.CodeUnauthenticated
	case http.StatusForbidden:
		return connect.CodePermissionDenied
	case http.StatusNotFound:
		return connect.CodeNotFound
	case http.StatusConflict:
		return connect.CodeAborted
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return connect.CodeDeadlineExceeded
	case http.StatusPreconditionFailed:
		return connect.CodeFailedPrecondition
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return connect.CodeResourceExhausted
	case http.StatusNotImplemented:
		return connect.CodeUnimplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return connect.CodeUnavailable
	}
	return connect.CodeUnknown
}
