package apierror

import (
	"strings"

	"connectrpc.com/connect"
)

// Reasons of the errors the edge writes in place of an answer without an
// ErrorInfo (see [ShapeJSON], [WriteUnsupportedMediaType],
// [WriteMethodNotAllowed]).
const (
	ReasonInvalidJSON          = "INVALID_JSON"
	ReasonUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	ReasonMethodNotAllowed     = "METHOD_NOT_ALLOWED"
)

// ShapeJSON is the body a JSON caller gets for a Connect JSON error body
// that connect-go wrote, the backend's or the edge's own handler's: the body
// rewriteJSON reshapes (rewrite.go), unless the error has no google.rpc.ErrorInfo. The
// services add one to every error they return; an error without one is
// connect-go's own, from the protocol (a body that is not the request's
// JSON, say), and its message names Go types ("unmarshal into
// *svcv1.ListOrganizationsRequest"). That error is answered in the edge's
// words, with the same code and an ErrorInfo in the edge's [Domain]:
// reason INVALID_JSON for a body that does not decode, else the code's name
// in upper snake case (INVALID_ARGUMENT).
//
// ok is as rewriteJSON's: false when body is not a Connect error body
// (then out is body).
func ShapeJSON(body []byte) (out []byte, ok bool) {
	out, e, ok := rewriteJSON(body)
	if !ok || e.hasErrorInfo {
		return out, ok
	}
	return marshalError(protocolError(e.code, e.message)), true
}

const errorInfoType = "google.rpc.ErrorInfo"

// protocolError is the edge's error for connect-go's error of code and
// message.
func protocolError(code connect.Code, message string) *connect.Error {
	if code != connect.CodeInvalidArgument {
		return New(code, strings.ToUpper(code.String()), clean(message))
	}
	switch {
	case strings.Contains(message, "zero-length payload"):
		return New(code, ReasonInvalidJSON, "the request body is empty: send a JSON object ({} when no field is set)")
	case strings.HasPrefix(message, "unmarshal message:"):
		why := "it does not decode"
		// protojson's error, without its "proto:" prefix (a space or a
		// no-break space after it, chosen at random by protobuf-go).
		if i := strings.LastIndex(message, "proto:"); i >= 0 {
			why = strings.TrimLeft(message[i+len("proto:"):], " \u00a0")
		}
		return New(code, ReasonInvalidJSON, "the request body is not the procedure's request in JSON: "+why)
	}
	return New(code, strings.ToUpper(code.String()), clean(message))
}

// clean drops what names Go types from a message of connect-go's.
func clean(message string) string {
	if i := strings.Index(message, "unmarshal into *"); i >= 0 {
		return "the message does not decode"
	}
	return message
}
