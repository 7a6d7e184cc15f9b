package idempotency

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/wire"
)

func frame(flags byte, payload string) []byte {
	b := make([]byte, 5, 5+len(payload))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.String()
}

var (
	grpcCall    = wire.Call{Protocol: wire.GRPC, Procedure: "/svc.v1.S/M"}
	webCall     = wire.Call{Protocol: wire.GRPCWeb, Procedure: "/svc.v1.S/M"}
	connectCall = wire.Call{Protocol: wire.Connect, Procedure: "/svc.v1.S/M", UnaryConnect: true}
)

func TestCaptureResult(t *testing.T) {
	tests := []struct {
		name  string
		call  wire.Call
		max   int
		write func(w http.ResponseWriter)
		code  connect.Code
		end   wire.Ending
	}{
		{"grpc declared trailers", grpcCall, 1 << 10, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
			w.WriteHeader(200)
			_, _ = w.Write(frame(0, "msg"))
			w.Header().Set("Grpc-Status", "0")
		}, wire.OK, wire.Whole},
		{"grpc prefixed trailers", grpcCall, 1 << 10, func(w http.ResponseWriter) {
			w.WriteHeader(200)
			_, _ = w.Write(frame(0, "msg"))
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "6")
		}, connect.CodeAlreadyExists, wire.Whole},
		{"grpc trailers-only", grpcCall, 1 << 10, func(w http.ResponseWriter) {
			w.Header().Set("Grpc-Status", "14")
			w.WriteHeader(200)
		}, connect.CodeUnavailable, wire.Whole},
		{"grpc without a status", grpcCall, 1 << 10, func(w http.ResponseWriter) {
			w.WriteHeader(200)
			_, _ = w.Write(frame(0, "msg"))
		}, 0, wire.CutShort},
		{"grpc too large, status known", grpcCall, 4, func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(200)
			_, _ = w.Write(frame(0, "a long message"))
			w.Header().Set("Grpc-Status", "0")
		}, wire.OK, wire.Whole},
		{"grpc-web too large, status in the trailer frame", webCall, 8, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc-web+proto")
			w.WriteHeader(200)
			_, _ = w.Write(frame(0, "a long message"))
			_, _ = w.Write(frame(0x80, "grpc-status: 5\r\n"))
		}, connect.CodeNotFound, wire.Whole},
		{"grpc-web gzip, trailer frame compressed", webCall, 1 << 10, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc-web+proto")
			w.Header().Set("Grpc-Encoding", "gzip")
			w.WriteHeader(200)
			_, _ = w.Write(frame(0x01, gzipped("message")))
			_, _ = w.Write(frame(0x81, gzipped("grpc-status: 6\r\ngrpc-message: taken\r\n")))
		}, connect.CodeAlreadyExists, wire.Whole},
		{"connect success", connectCall, 1 << 10, func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "2")
			_, _ = w.Write([]byte("{}"))
		}, wire.OK, wire.Whole},
		{"connect success too large", connectCall, 1, func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"name":"x"}`))
		}, wire.OK, wire.Whole},
		{"connect body shorter than its Content-Length", connectCall, 1 << 10, func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "10")
			_, _ = w.Write([]byte("{}"))
		}, 0, wire.CutShort},
		{"connect error", connectCall, 1 << 10, func(w http.ResponseWriter) {
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"code":"already_exists","message":"taken"}`))
		}, connect.CodeAlreadyExists, wire.Whole},
		{"connect error too large", connectCall, 4, func(w http.ResponseWriter) {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"code":"invalid_argument"}`))
		}, 0, wire.Unknowable},
		{"an error that is not Connect's", connectCall, 1 << 10, func(w http.ResponseWriter) {
			w.WriteHeader(502)
			_, _ = w.Write([]byte("bad gateway"))
		}, connect.CodeUnavailable, wire.Whole}, // as a Connect client reads it
		{"nothing written", connectCall, 1 << 10, func(http.ResponseWriter) {}, 0, wire.CutShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c := newCapture(rec, tt.max, tt.call)
			tt.write(c)
			c.finish()
			code, end := c.result(tt.call)
			if code != tt.code || end != tt.end {
				t.Fatalf("result = %v, %v; want %v, %v", code, end, tt.code, tt.end)
			}
		})
	}
}

func TestCapturePassesTheAnswerOnAndHoldsBackItsEnd(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Ratelimit-Remaining", "9") // an earlier step's
	c := newCapture(rec, 1<<10, connectCall)
	c.Flush() // nothing to flush yet: the answer must not go out
	if rec.Flushed {
		t.Fatal("flushed before any body")
	}
	c.Header().Set("Content-Type", "application/grpc")
	c.Header().Set("Trailer", "Grpc-Status")
	c.WriteHeader(200)
	_, _ = c.Write([]byte("hello, "))
	_, _ = c.Write([]byte("world"))
	c.Flush()
	if got := rec.Body.String(); got != "hello, worl" || !rec.Flushed {
		t.Fatalf("client got %q (flushed %v) before the end, want all but the last byte, flushed", got, rec.Flushed)
	}
	c.Header().Set("Grpc-Status", "0")
	c.Header().Set(http.TrailerPrefix+"Grpc-Message", "fine")
	c.finish()
	c.end()
	if got := rec.Body.String(); got != "hello, world" {
		t.Fatalf("client got %q at the end", got)
	}
	h := rec.Header()
	if h.Get("Content-Type") != "application/grpc" || h.Get("Grpc-Status") != "0" || h.Get(http.TrailerPrefix+"Grpc-Message") != "fine" || h.Get("X-Ratelimit-Remaining") != "9" {
		t.Fatalf("client's header map: %v", h)
	}
	if c.snap.Get("X-Ratelimit-Remaining") != "" {
		t.Fatalf("capture recorded an earlier step's header: %v", c.snap)
	}
	if c.trailer.Get("Grpc-Status") != "0" || c.trailer.Get("Grpc-Message") != "fine" || len(c.trailer) != 2 {
		t.Fatalf("trailers %v", c.trailer)
	}
	if c.body.String() != "hello, world" {
		t.Fatalf("recorded body %q", c.body.String())
	}
}

func TestReplayWritesWhatWasKept(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "current")
	replay(rec, &response{
		status:  200,
		header:  http.Header{"Content-Type": {"application/grpc"}, "Trailer": {"Grpc-Status"}},
		trailer: http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"fine"}},
		body:    []byte("hello"),
	})
	res := rec.Result()
	if res.StatusCode != 200 || rec.Body.String() != "hello" || res.Header.Get(HeaderReplayed) != "true" || res.Header.Get("X-Request-Id") != "current" {
		t.Fatalf("replay: %d %q %v", res.StatusCode, rec.Body.String(), res.Header)
	}
	if res.Trailer.Get("Grpc-Status") != "0" || res.Trailer.Get("Grpc-Message") != "fine" {
		t.Fatalf("replay trailers: %v", res.Trailer)
	}
}

func TestStoredLeavesOutWhatDescribesTheCurrentRequest(t *testing.T) {
	h := stored(http.Header{
		"Content-Type": {"application/json"}, "Content-Length": {"2"}, "Date": {"now"}, "X-Request-Id": {"id"},
		"X-Ratelimit-Remaining": {"3"}, "Ratelimit": {"x"}, "Connection": {"close"}, "Grpc-Status": {"0"},
	})
	if len(h) != 3 || h.Get("Content-Type") == "" || h.Get("Content-Length") == "" || h.Get("Grpc-Status") == "" {
		t.Fatalf("stored = %v", h)
	}
}

func TestServeLeavesCallsItDoesNotApplyTo(t *testing.T) {
	s := New(nil, Options{}) // never reaches Redis here
	tests := []struct {
		name     string
		key      string
		eligible bool
		call     wire.Call
	}{
		{"no header", "", true, connectCall},
		{"not honored by the operation table", "k", false, connectCall},
		{"streaming", "k", true, wire.Call{Protocol: wire.Connect, Procedure: "/svc.v1.S/Watch", Streaming: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.call.Procedure, strings.NewReader("{}"))
			r.Header.Set("Content-Type", "application/json")
			if tt.key != "" {
				r.Header.Set(HeaderKey, tt.key)
			}
			ran := false
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true })
			if out, refusal := s.Serve(httptest.NewRecorder(), r, tt.call, "sub", tt.eligible, false, next); out != "" || refusal != nil || !ran {
				t.Fatalf("outcome %q, refusal %v, next ran %v; want \"\", none and true", out, refusal, ran)
			}
		})
	}
}

func TestServeRefusesBadKeysAndBodiesBeforeRedis(t *testing.T) {
	s := New(nil, Options{MaxRequestBytes: 8}) // never reaches Redis here
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("forwarded") })
	for _, tt := range []struct {
		key, body string
		code      connect.Code
		out       Outcome
	}{
		{"bad\x01key", "{}", connect.CodeInvalidArgument, Invalid},
		{"good", `{"name":"too long"}`, connect.CodeResourceExhausted, NotStored},
	} {
		r := httptest.NewRequest(http.MethodPost, connectCall.Procedure, strings.NewReader(tt.body))
		r.ContentLength = -1 // as a chunked request
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(HeaderKey, tt.key)
		rec := httptest.NewRecorder()
		out, refusal := s.Serve(rec, r, connectCall, "sub", true, false, next)
		if out != tt.out || refusal == nil || refusal.Code() != tt.code || rec.Code != http.StatusOK || rec.Body.Len() != 0 {
			t.Errorf("key %q body %q: outcome %q, refusal %v, written HTTP %d %q; want %q, a refusal %v for the chain to write, nothing written",
				tt.key, tt.body, out, refusal, rec.Code, rec.Body, tt.out, tt.code)
		}
	}
}
