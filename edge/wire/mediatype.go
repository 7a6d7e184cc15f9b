package wire

import (
	"mime"
	"net/http"
	"slices"
	"strings"
)

// Media is what a media type of the API says of a call or an answer.
type Media struct {
	Type string // the media type, lower case and without parameters
	// Protocol is HTTP for application/json: a Connect unary JSON request
	// is told apart by its Connect-Protocol-Version header (Classify).
	Protocol Protocol
	JSON     bool // messages are JSON, not binary protobuf
	Unary    bool // Connect unary (or HTTP/JSON): errors are HTTP statuses with a body
	Text     bool // gRPC-Web text: base64 of the binary protocol's bytes
}

// mediaTypes is the one table of the media types the edge serves, without
// parameters. It lists exactly the codecs the edge serves, so
// application/grpc+xml is in no protocol, as connect-go's handler says.
var mediaTypes = map[string]Media{
	"application/json":                {Protocol: HTTP, JSON: true, Unary: true},
	"application/proto":               {Protocol: Connect, Unary: true},
	"application/connect+json":        {Protocol: Connect, JSON: true},
	"application/connect+proto":       {Protocol: Connect},
	"application/grpc":                {Protocol: GRPC},
	"application/grpc+proto":          {Protocol: GRPC},
	"application/grpc+json":           {Protocol: GRPC, JSON: true},
	"application/grpc-web":            {Protocol: GRPCWeb},
	"application/grpc-web+proto":      {Protocol: GRPCWeb},
	"application/grpc-web+json":       {Protocol: GRPCWeb, JSON: true},
	"application/grpc-web-text":       {Protocol: GRPCWeb, Text: true},
	"application/grpc-web-text+proto": {Protocol: GRPCWeb, Text: true},
	"application/grpc-web-text+json":  {Protocol: GRPCWeb, JSON: true, Text: true},
}

func init() {
	for mt, m := range mediaTypes {
		m.Type = mt
		mediaTypes[mt] = m
	}
}

// MediaOf is what the Content-Type of h says (read by MediaType); ok is
// false for a media type the edge does not serve.
func MediaOf(h http.Header) (Media, bool) {
	ct := FirstValue(h["Content-Type"])
	if m, ok := mediaTypes[ct]; ok {
		return m, true // what clients send: one lookup (see MediaType)
	}
	mt, ok := parseMediaType(ct)
	if !ok {
		return Media{}, false
	}
	m, ok := mediaTypes[mt]
	return m, ok
}

// AcceptPost lists the media types the edge serves, sorted, in the form
// connect-go's handler sends in the Accept-Post header of a 415: JSON
// ones also with "; charset=utf-8", but for gRPC-Web text's, which
// connect-go does not serve (it is the edge's addition).
func AcceptPost() string { return acceptPost }

var acceptPost = func() string {
	var all []string
	for mt, m := range mediaTypes {
		all = append(all, mt)
		if m.JSON && !m.Text {
			all = append(all, mt+"; charset=utf-8")
		}
	}
	slices.Sort(all)
	return strings.Join(all, ", ")
}()

// MediaType is the media type of h's Content-Type, lower case and without
// its parameters; ok is false when it is missing, longer than 128 bytes (no
// media type of this API is) or malformed. It is the edge's one reading of
// a Content-Type: a request's (the chain, the refusal's protocol, the
// idempotency fingerprint, the operator API) and an answer's (the end of a
// stream the edge cuts).
func MediaType(h http.Header) (mt string, ok bool) {
	ct := FirstValue(h["Content-Type"])
	if _, plain := mediaTypes[ct]; plain {
		// What clients send, as ParseMediaType would return it, without
		// its lowering and parameter map (4,000 instructions a call).
		return ct, true
	}
	return parseMediaType(ct)
}

// parseMediaType is MediaType's reading of a Content-Type that is not
// written as the table's keys are.
func parseMediaType(ct string) (mt string, ok bool) {
	if len(ct) > 128 {
		return "", false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return mt, err == nil
}
