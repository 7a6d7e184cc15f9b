package result_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/result"
	"github.com/orgedge/edge/edge/wire"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// framed follows body as the answer's envelopes for c.
func framed(c classify.Call, body ...[]byte) *wire.Frames {
	f := result.NewFrames(c)
	for _, b := range body {
		f.Feed(b)
	}
	return f
}

func TestOfReadsTheCodeOfEveryProtocolCompressedOrNot(t *testing.T) {
	grpc := classify.Call{Protocol: classify.GRPC}
	web := classify.Call{Protocol: classify.GRPCWeb}
	webStream := classify.Call{Protocol: classify.GRPCWeb, Streaming: true}
	stream := classify.Call{Protocol: classify.Connect, Streaming: true}
	unary := classify.Call{Protocol: classify.Connect, UnaryConnect: true}
	msg := wire.Envelope(0, []byte("message"))
	denied := "grpc-status: 7\r\ngrpc-message: no\r\n"
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tt := range []struct {
		name string
		call classify.Call
		a    result.Answer
		code connect.Code
		end  result.Ending
	}{
		{"grpc ok", grpc, result.Answer{Status: 200, Header: hdr(), Trailer: hdr("Grpc-Status", "0")}, result.OK, result.Whole},
		{"grpc backend error", grpc, result.Answer{Status: 200, Header: hdr(), Trailer: hdr("Grpc-Status", "5")}, connect.CodeNotFound, result.Whole},
		{"grpc trailers set undeclared", grpc, result.Answer{Status: 200, Header: hdr(), Trailer: hdr(http.TrailerPrefix+"Grpc-Status", "6")}, connect.CodeAlreadyExists, result.Whole},
		{"grpc trailers-only", grpc, result.Answer{Status: 200, Header: hdr("Grpc-Status", "14")}, connect.CodeUnavailable, result.Whole},
		{"grpc without status", grpc, result.Answer{Status: 200, Header: hdr()}, 0, result.CutShort},
		{"grpc-web ok", web, result.Answer{Status: 200, Header: hdr(),
			Frames: framed(web, msg, wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 0\r\n")))}, result.OK, result.Whole},
		{"grpc-web stream ended with an error", webStream, result.Answer{Status: 200, Header: hdr(),
			Frames: framed(webStream, msg, msg, wire.Envelope(wire.FlagTrailer, []byte(denied)))}, connect.CodePermissionDenied, result.Whole},
		{"grpc-web gzip, compressed trailers", webStream, result.Answer{Status: 200, Header: hdr("Grpc-Encoding", "gzip"),
			Frames: framed(webStream, wire.Envelope(wire.FlagCompressed, gz(t, "m")), wire.Envelope(wire.FlagTrailer|wire.FlagCompressed, gz(t, denied)))},
			connect.CodePermissionDenied, result.Whole},
		{"grpc-web trailers-only", web, result.Answer{Status: 200, Header: hdr("Grpc-Status", "16"), Frames: framed(web)}, connect.CodeUnauthenticated, result.Whole},
		{"grpc-web cut before its trailers", webStream, result.Answer{Status: 200, Header: hdr(), Frames: framed(webStream, msg)}, 0, result.CutShort},
		{"grpc-web refused by a proxy", web, result.Answer{Status: 503, Header: hdr(), Frames: framed(web)}, connect.CodeUnavailable, result.Whole},
		{"connect stream ok", stream, result.Answer{Status: 200, Header: hdr(),
			Frames: framed(stream, msg, wire.Envelope(wire.FlagEndStream, []byte(`{}`)))}, result.OK, result.Whole},
		{"connect stream ended with an error", stream, result.Answer{Status: 200, Header: hdr(),
			Frames: framed(stream, msg, wire.Envelope(wire.FlagEndStream, []byte(`{"error":{"code":"permission_denied"}}`)))}, connect.CodePermissionDenied, result.Whole},
		{"connect stream gzip", stream, result.Answer{Status: 200, Header: hdr("Connect-Content-Encoding", "gzip"),
			Frames: framed(stream, wire.Envelope(wire.FlagEndStream|wire.FlagCompressed, gz(t, `{"error":{"code":"not_found"}}`)))}, connect.CodeNotFound, result.Whole},
		{"connect stream cut", stream, result.Answer{Status: 200, Header: hdr(), Frames: framed(stream, msg)}, 0, result.CutShort},
		{"connect unary ok", unary, result.Answer{Status: 200, Header: hdr("Content-Length", "2"), Written: 2}, result.OK, result.Whole},
		{"connect unary error", unary, result.Answer{Status: 409, Header: hdr(), Body: []byte(`{"code":"already_exists"}`)}, connect.CodeAlreadyExists, result.Whole},
		{"connect unary error too large to keep", unary, result.Answer{Status: 400, Header: hdr(), BodyOver: true}, 0, result.Unknowable},
		{"an error that is not Connect's", unary, result.Answer{Status: 502, Header: hdr(), Body: []byte("bad gateway")}, connect.CodeUnavailable, result.Whole},
		{"connect unary shorter than its length", unary, result.Answer{Status: 200, Header: hdr("Content-Length", "10"), Written: 2}, 0, result.CutShort},
		{"nothing written", unary, result.Answer{}, 0, result.CutShort},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, end := result.Of(tt.call, tt.a)
			if end != tt.end || end == result.Whole && code != tt.code {
				t.Fatalf("Of = %v, %v; want %v, %v", code, end, tt.code, tt.end)
			}
		})
	}
}
