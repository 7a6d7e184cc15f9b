package wire_test

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/orgedge/edge/edge/wire"
)

func gzipBytes(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFramesKeepTheEndFrameHoweverTheBodyIsSplit(t *testing.T) {
	const trailer = "grpc-status: 6\r\ngrpc-message: taken\r\n"
	plain := bytes.Join([][]byte{wire.Envelope(0, []byte("message")), wire.Envelope(0, nil), wire.Envelope(wire.FlagTrailer, []byte(trailer))}, nil)
	compressed := bytes.Join([][]byte{
		wire.Envelope(wire.FlagCompressed, gzipBytes(t, "message")),
		wire.Envelope(wire.FlagTrailer|wire.FlagCompressed, gzipBytes(t, trailer)),
	}, nil)
	for _, tt := range []struct {
		name, encoding string
		body           []byte
		frames         uint64
	}{{"plain", "", plain, 3}, {"gzip", "gzip", compressed, 2}} {
		for _, size := range []int{1, 2, 3, 5, 7, len(tt.body)} {
			f := wire.Frames{End: wire.FlagTrailer}
			for b := tt.body; len(b) > 0; {
				n := min(size, len(b))
				f.Feed(b[:n])
				b = b[n:]
			}
			got, ok := f.EndFrame(tt.encoding)
			if !ok || wire.Trailer(got).Get("Grpc-Status") != "6" || f.Started() != tt.frames || f.Partial() {
				t.Errorf("%s, fed %d bytes at a time: end frame %q (%v), %d frames begun (partial %v); want grpc-status 6 of %d frames",
					tt.name, size, got, ok, f.Started(), f.Partial(), tt.frames)
			}
		}
	}
	cut := []struct {
		name, encoding string
		body           []byte
	}{
		{"no trailer frame", "", wire.Envelope(0, []byte("message"))},
		{"truncated trailer", "", plain[:len(plain)-3]},
		{"message after trailers", "", append(bytes.Clone(plain), wire.Envelope(0, []byte("more"))...)},
		{"two trailer frames", "", append(bytes.Clone(plain), wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 0\r\n"))...)},
		{"compressed without an encoding", "", compressed},
		{"compressed in an unknown encoding", "br", compressed},
		{"a trailer frame too large", "", wire.Envelope(wire.FlagTrailer, make([]byte, wire.MaxEndFrameBytes+1))},
	}
	for _, tt := range cut {
		f := wire.Frames{End: wire.FlagTrailer}
		f.Feed(tt.body)
		if got, ok := f.EndFrame(tt.encoding); ok {
			t.Errorf("%s: end frame %q, want none", tt.name, got)
		}
	}
}

func TestFramesWithoutAnEndKeepNothingAndCountMessages(t *testing.T) {
	var f wire.Frames
	f.Feed(wire.Envelope(0, []byte("one")))
	f.Feed(wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 0\r\n"))[:3])
	if _, ok := f.EndFrame(""); ok || f.Started() != 2 || !f.Partial() {
		t.Fatalf("started %d, partial %v: want 2 frames begun, the second partial, no end frame kept", f.Started(), f.Partial())
	}
}
