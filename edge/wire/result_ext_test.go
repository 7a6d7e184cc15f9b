package wire_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"

	"connectrpc.com/connect"

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
func framed(c wire.Call, body ...[]byte) *wire.Frames {
	f := wire.NewFrames(c)
	for _, b := range body {
		f.Feed(b)
	}
	return f
}

func TestOfReadsTheCodeOfEveryProtocolCompressedOrNot(t *testing.T) {
	grpc := wire.Call{Protocol: wire.GRPC}
	web := wire.Call{Protocol: wire.GRPCWeb}
	webStream := wire.Call{Protocol: wire.GRPCWeb, Streaming: true}
	stream := wire.Call{Protocol: wire.Connect, Streaming: true}
	unary := wire.Call{Protocol: wire.Connect, UnaryConnect: true}
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
		call wire.Call
		a    wire.Answer
		code connect.Code
		end  wire.Ending
	}{
		{"grpc ok", grpc, wire.Answer{Status: 200, Header: hdr(), Trailer: hdr("Grpc-Status", "0")}, wire.OK, wire.Whole},
		{"grpc backend error", grpc, wire.Answer{Status: 200, Header: hdr(), Trailer: hdr("Grpc-Status", "5")}, connect.CodeNotFound, wire.Whole},
		{"grpc trailers set undeclared", grpc, wire.Answer{Status: 200, Header: hdr(), Trailer: hdr(http.TrailerPrefix+"Grpc-Status", "6")}, connect.CodeAlreadyExists, wire.Whole},
		{"grpc trailers-only", grpc, wire.Answer{Status: 200, Header: hdr("Grpc-Status", "14")}, connect.CodeUnavailable, wire.Whole},
		{"grpc without status", grpc, wire.Answer{Status: 200, Header: hdr()}, 0, wire.CutShort},
		{"grpc-web ok", web, wire.Answer{Status: 200, Header: hdr(),
			Frames: framed(web, msg, wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 0\r\n")))}, wire.OK, wire.Whole},
		{"grpc-web stream ended with an error", webStream, wire.Answer{Status: 200, Header: hdr(),
			Frames: framed(webStream, msg, msg, wire.Envelope(wire.FlagTrailer, []byte(denied)))}, connect.CodePermissionDenied, wire.Whole},
		{"grpc-web gzip, compressed trailers", webStream, wire.Answer{Status: 200, Header: hdr("Grpc-Encoding", "gzip"),
			Frames: framed(webStream, wire.Envelope(wire.FlagCompressed, gz(t, "m")), wire.Envelope(wire.FlagTrailer|wire.FlagCompressed, gz(t, denied)))},
			connect.CodePermissionDenied, wire.Whole},
		{"grpc-web trailers-only", web, wire.Answer{Status: 200, Header: hdr("Grpc-Status", "16"), Frames: framed(web)}, connect.CodeUnauthenticated, wire.Whole},
		{"grpc-web cut before its trailers", webStream, wire.Answer{Status: 200, Header: hdr(), Frames: framed(webStream, msg)}, 0, wire.CutShort},
		{"grpc-web refused by a proxy", web, wire.Answer{Status: 503, Header: hdr(), Frames: framed(web)}, connect.CodeUnavailable, wire.Whole},
		{"connect stream ok", stream, wire.Answer{Status: 200, Header: hdr(),
			Frames: framed(stream, msg, wire.Envelope(wire.FlagEndStream, []byte(`{}`)))}, wire.OK, wire.Whole},
		{"connect stream ended with an error", stream, wire.Answer{Status: 200, Header: hdr(),
			Frames: framed(stream, msg, wire.Envelope(wire.FlagEndStream, []byte(`{"error":{"code":"permission_denied"}}`)))}, connect.CodePermissionDenied, wire.Whole},
		{"connect stream gzip", stream, wire.Answer{Status: 200, Header: hdr("Connect-Content-Encoding", "gzip"),
			Frames: framed(stream, wire.Envelope(wire.FlagEndStream|wire.FlagCompressed, gz(t, `{"error":{"code":"not_found"}}`)))}, connect.CodeNotFound, wire.Whole},
		{"connect stream cut", stream, wire.Answer{Status: 200, Header: hdr(), Frames: framed(stream, msg)}, 0, wire.CutShort},
		{"connect unary ok", unary, wire.Answer{Status: 200, Header: hdr("Content-Length", "2"), Written: 2}, wire.OK, wire.Whole},
		{"connect unary error", unary, wire.Answer{Status: 409, Header: hdr(), Body: []byte(`{"code":"already_exists"}`)}, connect.CodeAlreadyExists, wire.Whole},
		{"connect unary error too large to keep", unary, wire.Answer{Status: 400, Header: hdr(), BodyOver: true}, 0, wire.Unknowable},
		{"an error that is not Connect's", unary, wire.Answer{Status: 502, Header: hdr(), Body: []byte("bad gateway")}, connect.CodeUnavailable, wire.Whole},
		{"connect unary shorter than its length", unary, wire.Answer{Status: 200, Header: hdr("Content-Length", "10"), Written: 2}, 0, wire.CutShort},
		{"nothing written", unary, wire.Answer{}, 0, wire.CutShort},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, end := wire.Of(tt.call, tt.a)
			if end != tt.end || end == wire.Whole && code != tt.code {
				t.Fatalf("Of = %v, %v; want %v, %v", code, end, tt.code, tt.end)
			}
		})
	}
}
