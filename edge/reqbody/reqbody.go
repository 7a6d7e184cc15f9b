// Package reqbody bounds a call's request body in size and in time, and
// names the refusal for a body the edge cut: a client cannot make the edge
// hold a goroutine, a connection and what the call reserved by sending
// slowly, nor forward a body larger than requests.max_body_bytes.
//
// It is a step of the chain that writes nothing itself: the chain wraps the
// body with [Bound] after the headers are in, and answers [Body.Refusal]
// when the proxy's read of the body failed. The time bound is
// internal/bodydeadline's, which the backend shares.
package reqbody

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/internal/bodydeadline"
)

// Options are a body's bounds.
type Options struct {
	// MaxBytes bounds the body's size (requests.max_body_bytes).
	MaxBytes int64
	// Timeout bounds a unary call's whole body, from its headers
	// (requests.body_timeout); MessageTimeout each message of a stream
	// (requests.stream_message_timeout).
	Timeout, MessageTimeout time.Duration
}

// ErrTooLarge is what a read returns past the size bound.
var ErrTooLarge = errors.New("request body too large")

// ErrMalformed is what a step that decodes the body before the chain reads
// it (gRPC-Web text's base64) wraps in a read error when the client sent
// bytes that do not decode: the call is refused as invalid_argument, not
// blamed on the backend.
var ErrMalformed = errors.New("request body malformed")

// Body is the bounds of one call's body.
type Body struct {
	o         Options
	streaming bool
	sized     sized // r.Body, when there is one: one allocation for both
	timed     *bodydeadline.Body
}

// Bound bounds r's body from now in time (its headers are in) and in size,
// replacing r.Body. w is r's ResponseWriter, or one that unwraps to it.
func Bound(w http.ResponseWriter, r *http.Request, streaming bool, o Options) *Body {
	b := &Body{o: o, streaming: streaming}
	if streaming {
		b.timed = bodydeadline.Stream(w, r, o.MessageTimeout)
	} else {
		b.timed = bodydeadline.Unary(w, r, o.Timeout)
	}
	if r.Body != nil {
		b.sized = sized{ReadCloser: r.Body, left: o.MaxBytes}
		r.Body = &b.sized
	}
	return b
}

// End is called when the call's handler returns: a read of the body
// after it (by the proxy's transport) no longer touches the finished
// call's ResponseWriter. Safe on a nil Body.
func (b *Body) End() {
	if b != nil {
		b.timed.End()
	}
}

// Pause stops the body's clock while the edge holds the call before
// reading it (edge/early); Resume starts it again, with the whole timeout
// from then. Safe on a nil Body.
func (b *Body) Pause() {
	if b != nil {
		b.timed.Pause()
	}
}

// Resume starts the clock Pause stopped, with the whole timeout from now.
func (b *Body) Resume() {
	if b != nil {
		b.timed.Resume()
	}
}

// Cut reports whether the edge cut the body: it passed its size bound or
// missed its deadline. Safe from any goroutine (the proxy reads the body in
// the transport's); false on a nil Body.
func (b *Body) Cut() bool {
	return b != nil && (b.sized.over.Load() || b.sized.malformed.Load() || b.timed.Expired())
}

// Refusal is the error to answer for a call whose forwarding failed with
// err, when the edge cut its body; nil when the body is not the cause.
func (b *Body) Refusal(err error) *connect.Error {
	switch {
	case b == nil:
		return nil
	case errors.Is(err, ErrTooLarge) || b.sized.over.Load():
		return TooLarge(b.o.MaxBytes)
	case errors.Is(err, ErrMalformed) || b.sized.malformed.Load():
		return apierror.New(connect.CodeInvalidArgument, "MALFORMED_REQUEST_BODY", "the request body could not be decoded (gRPC-Web text: not base64 in padded chunks)")
	case errors.Is(err, bodydeadline.ErrTimeout) || b.timed.Expired():
		msg := fmt.Sprintf("the request body did not arrive within %s", b.o.Timeout)
		if b.streaming {
			msg = fmt.Sprintf("a request message did not arrive within %s", b.o.MessageTimeout)
		}
		return apierror.New(connect.CodeDeadlineExceeded, "REQUEST_BODY_TIMEOUT", msg)
	}
	return nil
}

// Unwanted is for a call refused before its body is bounded (Bound): an
// unknown procedure or content type, a declared length over the bound.
// Over HTTP/1.1 net/http reads what is left of an unread body before it
// answers, to keep the connection, and nothing bounds that read yet: a
// client that declared a body and never sends it would hold the connection
// and a goroutine for ever (before the answer, and again when the server
// closes the body after it). So the answer says Connection: close, and the
// read deadline passes now: what had arrived is taken, the answer goes out
// and the connection closes. The deadline must not outlive the call on a
// connection that is kept, which is why this is only for a connection that
// closes. (After Bound, a refusal's unread body is bounded by the body's
// deadline; HTTP/2 resets the stream instead.)
func Unwanted(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// TooLarge is the refusal of a body larger than limit bytes, also for one
// whose declared length says so before it is read.
func TooLarge(limit int64) *connect.Error {
	return apierror.New(connect.CodeResourceExhausted, "REQUEST_TOO_LARGE", fmt.Sprintf("request body larger than %d bytes", limit),
		apierror.WithMetadata("limit_bytes", strconv.FormatInt(limit, 10)))
}

// sized fails reads past a bound, so that the proxy stops and the edge
// answers resource_exhausted instead of forwarding a truncated body. It
// reads at most one byte past the bound, and passes none of it on.
type sized struct {
	io.ReadCloser
	left      int64
	over      atomic.Bool // the body passed the bound
	malformed atomic.Bool // the body did not decode (ErrMalformed)
}

func (b *sized) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, ErrMalformed) {
		b.malformed.Store(true)
	}
	b.left -= int64(n)
	if b.left < 0 {
		b.over.Store(true)
		return 0, ErrTooLarge
	}
	return n, err
}
