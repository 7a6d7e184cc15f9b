package forward

import (
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

// tokenExpired is the error a stream ends with when its token expires.
func tokenExpired() *connect.Error {
	return apierror.New(connect.CodeUnauthenticated, identity.ReasonTokenExpired,
		"the stream's token expired; open a new stream with a fresh token")
}

// endAtExpiry makes a stream's answer end when its token expires.
func endAtExpiry(res *http.Response, f *call.State) {
	if res.Trailer == nil {
		// Filled by the transport at the end of the stream, or by us: the
		// proxy sends whatever it holds then as trailers.
		res.Trailer = http.Header{}
	}
	b := &expiringBody{body: res.Body, res: res, rec: f.Rec}
	b.timer = time.AfterFunc(time.Until(f.Expires), func() {
		b.expired.Store(true)
		_ = b.body.Close() // cancels the backend's stream; the proxy's read returns
	})
	res.Body = b
}

// expiringBody is a stream's answer that, once its token expired, ends
// with the edge's end-of-stream error instead of the backend's.
type expiringBody struct {
	body    io.ReadCloser
	res     *http.Response
	rec     *call.Recorder
	timer   *time.Timer
	expired atomic.Bool
	ended   bool
	tail    []byte // end of stream still to return
}

func (b *expiringBody) Read(p []byte) (int, error) {
	if b.ended {
		if len(b.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	n, err := b.body.Read(p)
	if err == nil || !b.expired.Load() {
		return n, err
	}
	return b.end(p, n, err)
}

// end ends the stream with the edge's error once the token expired. (Apart
// from Read, whose frame stays on an open stream's stack while it waits for
// the next message: see proxy.Proxy.ServeHTTP.)
func (b *expiringBody) end(p []byte, n int, err error) (int, error) {
	b.ended = true
	e := tokenExpired()
	tail, trailer, ok := apierror.EndStream(b.res.Header, e)
	if !ok {
		return n, err
	}
	b.rec.Refused(e)
	b.tail = tail
	for k, vs := range trailer {
		b.res.Trailer[k] = vs
	}
	if n > 0 {
		return n, nil
	}
	return b.Read(p)
}

func (b *expiringBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}
