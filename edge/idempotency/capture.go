package idempotency

import (
	"bytes"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/wire"
)

// capture stands in front of the client's ResponseWriter while the first
// request of a key runs: everything goes through to the client as it is
// written, and is recorded on the way. Its header map is its own, so that it
// records exactly what the handler behind it (the proxy) set, not what the
// edge's earlier steps set on the client's response; it merges the map into
// the client's when the status goes out, as the proxy itself would have.
//
// The client must not see the end of the answer before its outcome is
// recorded, or a duplicate sent the moment the answer arrives would find
// the key still in flight. So capture holds back the last byte written
// until end, and does not flush an answer that has no body yet (an empty
// body with Content-Length: 0 would end at the flush). Everything else
// ends only when the handler returns: chunked bodies, HTTP/2 streams.
//
// A client that goes away does not stop the recording: once a write to it
// fails, capture stops passing bytes on but keeps taking them, so that the
// handler reads the backend's answer to its end and the outcome is kept for
// the client's retry.
type capture struct {
	w      http.ResponseWriter
	header http.Header
	max    int // body bytes kept

	status  int
	snap    http.Header // header when the status went out
	body    bytes.Buffer
	written int64
	over    bool // the body passed max and is no longer kept
	gone    bool // a write to the client failed: nothing more is passed on
	held    byte // the last byte written, not yet passed on
	holding bool
	frames  *wire.Frames // the body's envelopes, for wire.Of
	trailer http.Header  // set by finish
	// rec is the call's record under the capture, when w is one: the
	// answer is read once per call, and they share the reading.
	rec reader
}

func newCapture(w http.ResponseWriter, max int, call wire.Call) *capture {
	c := &capture{w: w, header: make(http.Header), max: max, frames: wire.NewFrames(call)}
	if r, ok := w.(reader); ok {
		c.rec = r
		r.ReadElsewhere() // the capture reads the answer and hands its reading on
	}
	return c
}

// reader is the call's record under the capture (edge/call's Recorder):
// the answer is read once per call, by whichever step holds it whole
// first, and the others take that reading.
type reader interface {
	ReadElsewhere()
	Read(wire.Reading)
	Reading() (wire.Reading, bool)
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status != 0 {
		return
	}
	if status >= 100 && status < 200 {
		// Informational answers (103 Early Hints) are not passed on: a unary
		// RPC has no use for them, and the proxy clears the header map after
		// each, which would tangle with the merge below.
		return
	}
	c.status = status
	if c.rec != nil {
		if _, read := c.rec.Reading(); read {
			c.frames = nil // read already (result): not followed twice
		}
	}
	c.snap = c.header.Clone()
	dst := c.w.Header()
	for k, vv := range c.header {
		dst[k] = append(dst[k], vv...)
	}
	c.w.WriteHeader(status)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if len(b) == 0 {
		return 0, nil
	}
	c.written += int64(len(b))
	if !c.over {
		if c.body.Len()+len(b) > c.max {
			c.over = true
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(b)
		}
	}
	if c.frames != nil {
		c.frames.Feed(b)
	}
	c.pass(b[:len(b)-1])
	c.held, c.holding = b[len(b)-1], true
	return len(b), nil
}

// pass writes the byte held back, then p, unless the client is gone. A
// failed write is not the handler's concern: the answer is still whole.
func (c *capture) pass(p []byte) {
	if c.holding && !c.gone {
		if _, err := c.w.Write([]byte{c.held}); err != nil {
			c.gone = true
		}
	}
	c.holding = false
	if len(p) > 0 && !c.gone {
		if _, err := c.w.Write(p); err != nil {
			c.gone = true
		}
	}
}

// end passes on the byte held back: the answer may end.
func (c *capture) end() {
	c.pass(nil)
}

// Flush and Unwrap let the proxy flush every message and
// http.ResponseController reach the connection.
func (c *capture) Flush() {
	if c.written == 0 || c.gone {
		return
	}
	_ = http.NewResponseController(c.w).Flush()
}

func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// finish collects the trailers the handler set after the body, either
// declared in the Trailer header or with http.TrailerPrefix (the proxy does
// either), and hands them to the client's ResponseWriter in the same form.
// It must run before the edge's handler returns.
func (c *capture) finish() {
	c.trailer = make(http.Header)
	dst := c.w.Header()
	if c.status == 0 {
		// Nothing was written: pass the headers on for whatever net/http
		// writes by itself.
		for k, vv := range c.header {
			dst[k] = append(dst[k], vv...)
		}
		return
	}
	declared := declaredTrailers(c.snap)
	for k, vv := range c.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			c.trailer[http.CanonicalHeaderKey(name)] = append(c.trailer[http.CanonicalHeaderKey(name)], vv...)
			dst[k] = append(dst[k], vv...)
		} else if declared[k] {
			c.trailer[k] = vv
			dst[k] = vv
		}
	}
}

func declaredTrailers(h http.Header) map[string]bool {
	m := make(map[string]bool)
	for _, v := range h.Values("Trailer") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				m[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	return m
}

// result tells how the call ended (wire.Of), and its code when the
// ending is whole: the reading a step before it handed the call's record
// (the forward step's, of an answer the limits watch), else its own, which
// it hands the record.
func (c *capture) result(call wire.Call) (connect.Code, wire.Ending) {
	if c.rec != nil {
		if read, ok := c.rec.Reading(); ok {
			return read.Code, read.Ending
		}
	}
	a := wire.Answer{Status: c.status, Header: c.snap, Trailer: c.trailer, Frames: c.frames,
		Body: c.body.Bytes(), BodyOver: c.over, Written: c.written}
	code, ending := wire.Of(call, a)
	if c.rec != nil {
		c.rec.Read(wire.Reading{Code: code, Ending: ending})
	}
	return code, ending
}
