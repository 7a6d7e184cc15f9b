// Package bodydeadline bounds how long a server waits for a request body,
// so that a client sending slowly (or not at all) cannot pin a goroutine, a
// connection and what the call reserved. It sets the request's read
// deadline through http.ResponseController, which HTTP/1.1 and HTTP/2
// servers both honor, and clears it once the body (or, for a stream, the
// message) is in: the wait for the answer is not bounded here.
//
// It bounds time, not size, and does not answer the client: a read past the
// deadline fails with [ErrTimeout], [Body.Expired] reports it, and the
// server answers in its protocol.
package bodydeadline

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout is what a read returns once the deadline has passed (it wraps
// the server's own error).
var ErrTimeout = errors.New("request body not received in time")

// Body is a request body read under a deadline. It is not safe for
// concurrent reads (no body is).
type Body struct {
	io.ReadCloser
	rc      http.ResponseController // a value: one allocation fewer a call
	timeout time.Duration
	expired atomic.Bool
	due     atomic.Int64 // the deadline set (Unix ns); 0: none

	whole bool  // Unary: one deadline for the whole body
	size  int64 // the declared length; -1 unknown
	read  int64
	over  bool // the deadline is cleared for good

	env envelopes // a stream's messages

	// mu orders the deadline's changes with End: the body may be read
	// (by a proxy's transport) after the handler returned, when the
	// server's ResponseWriter no longer takes a deadline (x/net's HTTP/2
	// server dereferences a nil stream then).
	mu    sync.Mutex
	ended bool
}

// Unary bounds the whole body of r: it must be in within timeout from now.
// w is r's ResponseWriter (or one that unwraps to it). A body of known
// length zero is not wrapped: nothing is to be read, and a deadline left on
// an HTTP/1.1 connection would end the server's wait for the client's next
// byte, which cancels the request.
func Unary(w http.ResponseWriter, r *http.Request, timeout time.Duration) *Body {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || timeout <= 0 {
		return nil
	}
	b := &Body{ReadCloser: r.Body, rc: *http.NewResponseController(w), timeout: timeout, whole: true, size: r.ContentLength}
	b.set()
	r.Body = b
	return b
}

// Stream bounds each message of r's body, enveloped as Connect streaming,
// gRPC and binary gRPC-Web frame them (a 5-byte prefix: flags and
// big-endian length, then the payload): the first must begin within timeout
// from now, and each must be whole within timeout of its first byte.
// Between messages the body may stay idle (the stream's own deadline bounds
// that). gRPC-Web text (base64) is not followed: its first message is
// bounded, and the backend, which does not serve it, answers at once.
func Stream(w http.ResponseWriter, r *http.Request, timeout time.Duration) *Body {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || timeout <= 0 {
		return nil
	}
	b := &Body{ReadCloser: r.Body, rc: *http.NewResponseController(w), timeout: timeout, size: r.ContentLength}
	b.set()
	r.Body = b
	return b
}

// Expired reports whether the body missed its deadline: a read failed for
// it, or it has passed while the body (or a message) is still awaited. The
// second matters on HTTP/1.1, where the server cancels the request's
// context inside the read that fails, before that read returns. It is safe
// to call from any goroutine, and false on a nil Body.
func (b *Body) Expired() bool {
	if b == nil {
		return false
	}
	due := b.due.Load()
	return b.expired.Load() || due != 0 && time.Now().UnixNano() >= due
}

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if n > 0 && !b.whole && !b.over {
		b.frames(p[:n])
	}
	switch {
	case err == nil:
		if b.size >= 0 && b.read >= b.size {
			b.clear() // all in: clear before the server waits for what follows
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.expired.Store(true)
		return n, fmt.Errorf("%w: %w", ErrTimeout, err)
	default: // io.EOF, or the client gone
		b.clear()
	}
	return n, err
}

func (b *Body) set() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	due := time.Now().Add(b.timeout)
	if b.rc.SetReadDeadline(due) == nil {
		b.due.Store(due.UnixNano())
	}
}

// unset clears the deadline until the next set.
func (b *Body) unset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.due.Store(0)
	if !b.ended {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// End is called by the handler that bounded the body, before it returns:
// later reads (a proxy's transport may still read the body after the
// handler ended, e.g. when the client reset a stream) change no deadline
// of the ResponseWriter, which is no longer the handler's. Safe from any
// goroutine, and on a nil Body.
func (b *Body) End() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
}

// Pause clears the deadline while the server holds the call before any
// of its body is read (edge/early); Resume sets it again, from then. Both
// are safe on a nil Body, and do nothing once the body is in.
func (b *Body) Pause() {
	if b != nil && !b.over && b.read == 0 {
		b.unset()
	}
}

// Resume sets the deadline Pause cleared, from now.
func (b *Body) Resume() {
	if b != nil && !b.over && b.read == 0 {
		b.set()
	}
}

func (b *Body) clear() {
	if !b.over {
		b.over = true
		b.unset()
	}
}

// frames follows the envelopes in p: a message's first byte sets the
// deadline, its last clears it.
func (b *Body) frames(p []byte) {
	begun, partial := b.env.started, b.env.partial()
	b.env.feed(p)
	switch {
	case !b.env.partial():
		if partial || b.env.started != begun {
			b.unset()
		}
	case b.env.started != begun:
		b.set() // a new message began in p
	}
}
