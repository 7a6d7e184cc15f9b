package apierror

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/orgedge/edge/edge/wire"
)

// EndStream ends a stream whose response has started (its headers and
// maybe messages are out) with err, in the stream's protocol, named by the
// Content-Type of the response's header h: the bytes to send after the
// last whole message (Connect's end-of-stream message, gRPC-Web's trailers
// frame) and the trailers to set (gRPC's grpc-status, grpc-message and
// grpc-status-details-bin). ok is false for a content type that is no
// stream of Connect, gRPC or gRPC-Web.
func EndStream(h http.Header, err *connect.Error) (body []byte, trailer http.Header, ok bool) {
	m, ok := wire.MediaOf(h)
	switch {
	case !ok:
	case m.Protocol == wire.Connect && !m.Unary:
		return connectEndStream(err), nil, true
	case m.Protocol == wire.GRPCWeb:
		frame := grpcWebTrailers(err)
		if m.Text {
			frame = []byte(base64.StdEncoding.EncodeToString(frame))
		}
		return frame, nil, true
	case m.Protocol == wire.GRPC:
		return nil, grpcTrailers(err), true
	}
	return nil, nil, false
}

// connectEndStream is Connect's end-of-stream message: flag 0b10, then
// {"error": …} with the details as Connect sends them.
func connectEndStream(err *connect.Error) []byte {
	type detail struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	}
	type wireError struct {
		Code    string   `json:"code"`
		Message string   `json:"message,omitempty"`
		Details []detail `json:"details,omitempty"`
	}
	e := wireError{Code: err.Code().String(), Message: err.Message()}
	for _, d := range err.Details() {
		e.Details = append(e.Details, detail{Type: d.Type(), Value: base64.RawStdEncoding.EncodeToString(d.Bytes())})
	}
	payload, _ := json.Marshal(struct {
		Error wireError `json:"error"`
	}{e})
	return wire.Envelope(wire.FlagEndStream, payload)
}

// grpcWebTrailers is gRPC-Web's trailers frame: flag 0x80, then the
// trailers as HTTP/1 header lines.
func grpcWebTrailers(err *connect.Error) []byte {
	var b strings.Builder
	for k, vs := range grpcTrailers(err) {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", strings.ToLower(k), v)
		}
	}
	return wire.Envelope(wire.FlagTrailer, []byte(b.String()))
}

func grpcTrailers(err *connect.Error) http.Header {
	st := &statuspb.Status{Code: int32(err.Code()), Message: err.Message()}
	for _, d := range err.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	h := http.Header{}
	h.Set("Grpc-Status", strconv.Itoa(int(err.Code())))
	h.Set("Grpc-Message", percentEncode(err.Message()))
	if bin, merr := proto.Marshal(st); merr == nil {
		h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(bin))
	}
	return h
}

// percentEncode encodes grpc-message as the gRPC specification says:
// bytes outside printable ASCII, and '%', as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
