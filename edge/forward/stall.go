package forward

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/call"
)

// stallWriter ends a stream whose client stopped reading: each write (and
// flush) of the stream to the client must complete within timeout, else
// the connection (HTTP/1.1) or the stream (HTTP/2) is reset and the proxy
// stops. Without it a client that stops reading holds the stream, its
// lease, its goroutines and up to a flow-control window of buffered
// answer, until the stream's deadline (an hour).
type stallWriter struct {
	*call.Recorder
	rc      *http.ResponseController
	timeout time.Duration
	stalled bool // a write did not complete in time
}

func newStallWriter(w *call.Recorder, timeout time.Duration) *stallWriter {
	return &stallWriter{Recorder: w, rc: http.NewResponseController(w.ResponseWriter), timeout: timeout}
}

func (s *stallWriter) guard(write func() error) error {
	start := time.Now()
	// No deadline between writes: an idle stream is no stalled one.
	_ = s.rc.SetWriteDeadline(start.Add(s.timeout))
	err := write()
	_ = s.rc.SetWriteDeadline(time.Time{})
	if time.Since(start) >= s.timeout { // a later write may be the one that fails
		s.stalled = true
	}
	return err
}

func (s *stallWriter) Write(b []byte) (n int, err error) {
	err = s.guard(func() error {
		n, err = s.Recorder.Write(b)
		return err
	})
	return n, err
}

// FlushError is what http.ResponseController (the proxy's flusher) calls.
func (s *stallWriter) FlushError() error {
	return s.guard(func() error { return s.rc.Flush() })
}

func (s *stallWriter) Flush() { _ = s.FlushError() }

// errStalled is how the edge ends a stream whose client stopped reading:
// its connection or stream is reset, so the client reads no error; the call
// is counted and logged under its code.
var errStalled = connect.NewError(connect.CodeDeadlineExceeded, errors.New("the client stopped reading the stream (requests.stream_write_timeout)"))

// serveStream proxies a stream through a stallWriter. A stalled stream's
// proxy aborts (http.ErrAbortHandler); the edge then counts and logs the
// call as deadline_exceeded, and the connection or stream is already reset.
func (s *Step) serveStream(w *call.Recorder, r *http.Request) {
	// Over HTTP/1.1 the request is read whole before it is forwarded (it is
	// bounded in size and time like a unary call's). net/http discards and
	// closes an unread request body when the answer's headers go out, so a
	// backend that answered before the proxy had read the client's message
	// lost it, and the stream was cut (seen under load). Connect and
	// gRPC-Web over HTTP/1.1 carry no bidirectional streams: the client
	// sends its request whole and then reads. HTTP/2 needs nothing.
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody && !s.readWhole(w, r) {
		return
	}
	sw := newStallWriter(w, s.writeTimeout)
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler || !sw.stalled {
				panic(v)
			}
			w.End(errStalled)
			s.log.InfoContext(r.Context(), "stream ended: its client stopped reading", "procedure", call.Of(r).Call.Procedure,
				"stream_write_timeout", s.writeTimeout)
		}
	}()
	s.proxy.ServeHTTP(sw, r)
}

// readWhole reads r's body whole and gives r a copy of it to forward; false
// (the call answered) if it could not be read. (Apart from serveStream,
// whose frame stays on an open stream's stack: see proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (s *Step) readWhole(w *call.Recorder, r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.upstreamError(w, r, err)
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}
