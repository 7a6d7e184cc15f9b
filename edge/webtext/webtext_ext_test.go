package webtext_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/webtext"
)

// TestTextBodiesDecodeInAnyChunksAndAnswersEncodeMessageByMessage: a body
// of padded chunks, read one byte at a time, reaches next whole as binary
// gRPC-Web; what next writes, flushed after each message, leaves as text
// that decodes chunk by chunk at every flush; a body that is not base64
// fails its read with reqbody.ErrMalformed.
func TestTextBodiesDecodeInAnyChunksAndAnswersEncodeMessageByMessage(t *testing.T) {
	want := []byte("\x00\x00\x00\x00\x0ahello text")
	var body string
	for _, part := range [][]byte{want[:1], want[1:5], want[5:]} {
		body += base64.StdEncoding.EncodeToString(part)
	}
	var got []byte
	var gotType string
	h := webtext.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotType = r.Header.Get("Content-Type")
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/grpc-web+proto")
		for _, m := range []string{"a", "bcde", "fg"} {
			_, _ = w.Write([]byte(m))
			http.NewResponseController(w).Flush()
		}
	}))
	r := httptest.NewRequest(http.MethodPost, "/svc.v1.X/Y", io.NopCloser(iotest.OneByteReader(strings.NewReader(body))))
	r.Header.Set("Content-Type", "application/grpc-web-text+proto")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if !bytes.Equal(got, want) || gotType != "application/grpc-web+proto" {
		t.Fatalf("next read %q as %s, want %q as application/grpc-web+proto", got, gotType, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/grpc-web-text+proto" {
		t.Fatalf("answer Content-Type %q", ct)
	}
	// Each flush ends a padded chunk: "a", "bcde", "fg" encoded apart.
	wantOut := base64.StdEncoding.EncodeToString([]byte("a")) + base64.StdEncoding.EncodeToString([]byte("bcde")) +
		base64.StdEncoding.EncodeToString([]byte("fg"))
	if rec.Body.String() != wantOut {
		t.Fatalf("answer %q, want %q", rec.Body.String(), wantOut)
	}

	for _, bad := range []string{"AAAA!!!!", "AAAAA", "AA\nAA"} {
		var err error
		h := webtext.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, err = io.ReadAll(r.Body) }))
		r := httptest.NewRequest(http.MethodPost, "/svc.v1.X/Y", strings.NewReader(bad))
		r.Header.Set("Content-Type", "application/grpc-web-text")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if !errors.Is(err, reqbody.ErrMalformed) {
			t.Errorf("body %q: read error %v, want reqbody.ErrMalformed", bad, err)
		}
	}
}
