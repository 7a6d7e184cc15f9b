package reqbody_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/reqbody"
)

func TestABodyPastItsBoundIsCutAndRefusedAsTooLarge(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/svc.v1.S/M", strings.NewReader("0123456789"))
	r.ContentLength = -1 // undeclared: only reading finds the size
	b := reqbody.Bound(httptest.NewRecorder(), r, false, reqbody.Options{MaxBytes: 4, Timeout: time.Minute})
	got, err := io.ReadAll(r.Body)
	if !errors.Is(err, reqbody.ErrTooLarge) || len(got) > 4 {
		t.Fatalf("read %q, %v; want at most 4 bytes, then ErrTooLarge", got, err)
	}
	if !b.Cut() {
		t.Fatal("Cut() = false for a body past its bound")
	}
	if ref := b.Refusal(err); connect.CodeOf(ref) != connect.CodeResourceExhausted {
		t.Fatalf("refusal %v, want resource_exhausted", ref)
	}
}

func TestABodyWithinItsBoundsIsNotCut(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/svc.v1.S/M", strings.NewReader("0123"))
	b := reqbody.Bound(httptest.NewRecorder(), r, false, reqbody.Options{MaxBytes: 4, Timeout: time.Minute})
	if got, err := io.ReadAll(r.Body); err != nil || string(got) != "0123" {
		t.Fatalf("read %q, %v", got, err)
	}
	if b.Cut() || b.Refusal(io.ErrUnexpectedEOF) != nil {
		t.Fatalf("a body within its bounds: cut %v, refusal %v", b.Cut(), b.Refusal(io.ErrUnexpectedEOF))
	}
}
