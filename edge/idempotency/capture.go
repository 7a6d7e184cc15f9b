package idempotency

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/classify"
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
	web     webFrames
	trailer http.Header // set by finish
}

func newCapture(w http.ResponseWriter, max int) *capture {
	return &capture{w: w, header: make(http.Header), max: max}
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
	c.web.feed(b)
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

// ending is how much result knows of the call's end.
type ending int

const (
	whole      ending = iota // the code is known from a whole answer
	cutShort                 // the answer is not whole, or ends without a status
	unknowable               // the answer was whole, but its status is in a body too large to keep
)

// result tells how the call ended, and its code when the ending is whole.
func (c *capture) result(call classify.Call) (connect.Code, ending) {
	if c.status == 0 {
		return 0, cutShort
	}
	switch call.Protocol {
	case classify.GRPC:
		s := c.trailer.Get("Grpc-Status")
		if s == "" {
			s = c.snap.Get("Grpc-Status") // trailers-only
		}
		return grpcCode(s)
	case classify.GRPCWeb:
		if s := c.snap.Get("Grpc-Status"); s != "" {
			return grpcCode(s) // trailers-only
		}
		if strings.HasPrefix(c.snap.Get("Content-Type"), "application/grpc-web-text") {
			if c.over {
				return 0, unknowable
			}
			var text webFrames
			text.feed(decodeWebText(c.body.Bytes()))
			return grpcCode(text.status())
		}
		return grpcCode(c.web.status())
	}
	// Connect unary and plain HTTP/JSON: the status, and the body's code
	// when it is an error.
	if cl := c.snap.Get("Content-Length"); cl != "" && cl != strconv.FormatInt(c.written, 10) {
		return 0, cutShort
	}
	if c.status == http.StatusOK {
		return codeOK, whole
	}
	if c.over {
		return 0, unknowable
	}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(c.body.Bytes(), &e) == nil {
		var code connect.Code
		if code.UnmarshalText([]byte(e.Code)) == nil {
			return code, whole
		}
	}
	// An error without a Connect body (a 502 from something in between):
	// nothing says whether the backend ran the call.
	return connect.CodeUnknown, whole
}

// codeOK is success: connect-go has no name for it, gRPC's status is 0.
const codeOK connect.Code = 0

func codeName(c connect.Code) string {
	if c == codeOK {
		return "ok"
	}
	return c.String()
}

func grpcCode(s string) (connect.Code, ending) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 16 || len(s) > 2 {
		return 0, cutShort
	}
	return connect.Code(n), whole
}

// webFrames follows gRPC-Web's length-prefixed frames as the body goes by,
// keeping only the trailer frame (flag 0x80), so that the status is known
// even when the body is too large to keep.
type webFrames struct {
	head    [5]byte
	inHead  int    // bytes of the current frame's prefix read
	left    uint32 // payload bytes of the current frame still to come
	trailer bool   // the current frame is the trailer frame
	buf     []byte // the trailer frame's payload
	done    bool   // a whole trailer frame has been read
	bad     bool
}

// maxTrailerFrame bounds a gRPC-Web trailer frame.
const maxTrailerFrame = 64 << 10

func (f *webFrames) feed(b []byte) {
	for len(b) > 0 && !f.bad {
		if f.left == 0 && f.inHead < 5 {
			n := copy(f.head[f.inHead:], b)
			f.inHead += n
			b = b[n:]
			if f.inHead < 5 {
				return
			}
			f.left = binary.BigEndian.Uint32(f.head[1:])
			f.trailer = f.head[0]&0x80 != 0
			if f.trailer {
				if f.done || f.left > maxTrailerFrame {
					f.bad = true // a second trailer frame, or a huge one
					return
				}
				f.buf = f.buf[:0]
			} else if f.done {
				f.bad = true // a message after the trailers
				return
			}
			if f.left == 0 {
				f.endFrame()
			}
			continue
		}
		n := min(uint32(len(b)), f.left)
		if f.trailer {
			f.buf = append(f.buf, b[:n]...)
		}
		f.left -= n
		b = b[n:]
		if f.left == 0 {
			f.endFrame()
		}
	}
}

func (f *webFrames) endFrame() {
	f.inHead = 0
	if f.trailer {
		f.done = true
	}
}

// status is grpc-status from a whole trailer frame ("key: value\r\n" lines),
// or "" when there is none.
func (f *webFrames) status() string {
	if f.bad || !f.done || f.inHead != 0 || f.left != 0 {
		return ""
	}
	for line := range strings.SplitSeq(string(f.buf), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)) == "Grpc-Status" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// decodeWebText decodes a gRPC-Web text body: base64, possibly several
// padded chunks one after the other, so it decodes four characters at a
// time. What does not decode is dropped, and the frames then do not add up.
func decodeWebText(b []byte) []byte {
	out := make([]byte, 0, len(b)/4*3)
	var q [3]byte
	for i := 0; i+4 <= len(b); i += 4 {
		n, err := base64.StdEncoding.Decode(q[:], b[i:i+4])
		if err != nil {
			return out
		}
		out = append(out, q[:n]...)
	}
	return out
}
