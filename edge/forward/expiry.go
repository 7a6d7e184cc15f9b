package forward

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/identity"
)

// A stream lives at most as long as the token that opened it (plus the
// clock skew the edge allows on expiry): a stream may last an hour, a token
// minutes, and the token is what proves the caller still may. At expiry the
// edge cancels the backend's stream and ends the client's with
// unauthenticated, reason TOKEN_EXPIRED, in the stream's protocol; the
// client opens a new stream with a fresh token. (A server stream cannot
// carry a new token, so there is nothing to refresh in place.)
//
// A stream also ends when the edge shuts down (EndStreams): at once, with
// unavailable, reason EDGE_SHUTTING_DOWN, so that its client reconnects to
// another replica rather than wait out the shutdown grace and be cut.

// tokenExpired is the error a stream ends with when its token expires.
func tokenExpired() *connect.Error {
	return apierror.New(connect.CodeUnauthenticated, identity.ReasonTokenExpired,
		"the stream's token expired; open a new stream with a fresh token")
}

// shuttingDown is the error a stream ends with when the edge shuts down.
func shuttingDown() *connect.Error {
	return apierror.New(connect.CodeUnavailable, call.ReasonShuttingDown,
		"the edge is shutting down; open the stream again")
}

// endEarly makes a stream's answer end when its token expires (f.Expires,
// if set) or when draining ends, whichever comes first.
func endEarly(res *http.Response, f *call.State, draining context.Context) {
	if res.Trailer == nil {
		// Filled by the transport at the end of the stream, or by us: the
		// proxy sends whatever it holds then as trailers.
		res.Trailer = http.Header{}
	}
	b := &endingBody{body: res.Body, res: res, rec: f.Rec}
	if !f.Expires.IsZero() {
		b.timer = time.AfterFunc(time.Until(f.Expires), func() { b.endWith(tokenExpired()) })
	}
	b.stopDrain = context.AfterFunc(draining, func() { b.endWith(shuttingDown()) })
	res.Body = b
}

// endingBody is a stream's answer that, once ended early (its token
// expired, the edge shuts down), ends with the edge's end-of-stream error
// instead of the backend's.
type endingBody struct {
	body      io.ReadCloser
	res       *http.Response
	rec       *call.Recorder
	timer     *time.Timer // nil: no expiry
	stopDrain func() bool
	why       atomic.Pointer[connect.Error] // set once: what the stream ends with
	ended     bool
	tail      []byte // end of stream still to return
}

// endWith ends the stream with err, unless it is ended already.
func (b *endingBody) endWith(err *connect.Error) {
	if b.why.CompareAndSwap(nil, err) {
		_ = b.body.Close() // cancels the backend's stream; the proxy's read returns
	}
}

func (b *endingBody) Read(p []byte) (int, error) {
	if b.ended {
		if len(b.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	n, err := b.body.Read(p)
	if err == nil || b.why.Load() == nil {
		return n, err
	}
	return b.end(p, n, err)
}

// end ends the stream with the edge's error once it was ended early.
// (Apart from Read, whose frame stays on an open stream's stack while it
// waits for the next message: see proxy.Proxy.ServeHTTP.)
func (b *endingBody) end(p []byte, n int, err error) (int, error) {
	b.ended = true
	e := b.why.Load()
	tail, trailer, ok := apierror.EndStream(b.res.Header, e)
	if !ok {
		return n, err
	}
	b.rec.End(e)
	b.tail = tail
	for k, vs := range trailer {
		b.res.Trailer[k] = vs
	}
	if n > 0 {
		return n, nil
	}
	return b.Read(p)
}

func (b *endingBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.stopDrain()
	return b.body.Close()
}
