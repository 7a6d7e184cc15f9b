package reqbody_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/reqbody"
)

// read is what a handler that bounds and reads its body saw.
type read struct {
	n       int
	err     error
	cut     bool
	refusal *connect.Error
}

// reading serves handlers that bound their body with o, pause the clock
// for pause first if set (closing resumed after), read it whole and report
// what they saw.
func reading(t *testing.T, o reqbody.Options, pause time.Duration, resumed chan<- struct{}) (string, <-chan read) {
	t.Helper()
	out := make(chan read, 1)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := reqbody.Bound(w, r, false, o)
		defer b.End()
		if pause > 0 {
			b.Pause()
			time.Sleep(pause) // held (edge/early): the body's clock stands still
			b.Resume()
			close(resumed)
		}
		got, err := io.ReadAll(r.Body)
		out <- read{len(got), err, b.Cut(), b.Refusal(err)}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s.URL, out
}

func seen(t *testing.T, out <-chan read) read {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's read did not end")
		return read{}
	}
}

// post sends a body that starts with what, once after is closed (nil: at
// once), and then, unless finish, stalls until the test ends.
func post(t *testing.T, url, what string, finish bool, after <-chan struct{}) {
	t.Helper()
	body, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	go func() {
		if after != nil {
			<-after
		}
		_, _ = io.WriteString(w, what)
		if finish {
			_ = w.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/svc.v1.S/M", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	go func() {
		if res, err := http.DefaultClient.Do(req); err == nil {
			_ = res.Body.Close()
		}
	}()
}

func TestABodyThatStallsIsCutAtItsTimeoutAndRefusedDeadlineExceeded(t *testing.T) {
	url, out := reading(t, reqbody.Options{MaxBytes: 1 << 20, Timeout: 300 * time.Millisecond}, 0, nil)
	start := time.Now()
	post(t, url, `{"organization`, false, nil)
	r := seen(t, out)
	if !r.cut || r.refusal == nil || r.refusal.Code() != connect.CodeDeadlineExceeded {
		t.Fatalf("a stalled body: read %d bytes, %v; cut %v, refusal %v; want cut and deadline_exceeded", r.n, r.err, r.cut, r.refusal)
	}
	if !strings.Contains(r.refusal.Message(), "300ms") {
		t.Errorf("refusal %q does not say the bound", r.refusal.Message())
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("cut after %v, before its timeout", took)
	}
}

func TestTheBodysClockStandsStillWhileTheCallIsHeld(t *testing.T) {
	// Held for longer than the whole timeout; the body, sent after the
	// hold, is read within the timeout counted from then.
	resumed := make(chan struct{})
	url, out := reading(t, reqbody.Options{MaxBytes: 1 << 20, Timeout: 2 * time.Second}, 3*time.Second, resumed)
	post(t, url, `{"organizationId":"org-1"}`, true, resumed)
	if r := seen(t, out); r.err != nil || r.cut || r.n != len(`{"organizationId":"org-1"}`) {
		t.Fatalf("a body read after a hold longer than its timeout: %d bytes, %v, cut %v; want it whole", r.n, r.err, r.cut)
	}
}

func TestAnUnwantedBodyIsNotWaitedForBeforeTheAnswer(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqbody.Unwanted(w, r)
		w.WriteHeader(http.StatusUnsupportedMediaType)
	}))
	t.Cleanup(s.Close)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A body of 100000 bytes declared, 10 sent, the rest never.
	if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: edge\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the declared body never comes: %v", err)
	}
	if res.StatusCode != http.StatusUnsupportedMediaType || !res.Close {
		t.Fatalf("answer %d, Connection close %v; want 415 closing the connection", res.StatusCode, res.Close)
	}
	// Nor after it: the server closes the connection rather than wait for
	// the rest of the body.
	_, _ = io.Copy(io.Discard, res.Body)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the answer: %v, want the server to have closed the connection", err)
	}
}

func TestAfterAHoldTheBodyIsBoundedAgain(t *testing.T) {
	resumed := make(chan struct{})
	url, out := reading(t, reqbody.Options{MaxBytes: 1 << 20, Timeout: 300 * time.Millisecond}, 100*time.Millisecond, resumed)
	post(t, url, `{"organization`, false, resumed)
	if r := seen(t, out); !r.cut || r.refusal.Code() != connect.CodeDeadlineExceeded {
		t.Fatalf("a body that stalls after a hold: %v, cut %v, refusal %v; want cut deadline_exceeded", r.err, r.cut, r.refusal)
	}
}
