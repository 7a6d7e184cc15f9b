// Package webtext translates gRPC-Web's text mode (application/grpc-web-text,
// +proto and +json: base64 of the binary protocol's bytes) at the edge:
// the request body is decoded toward the chain and the backend, which see
// binary gRPC-Web, and the answer is encoded back, flushed message by
// message, with the text content type. Every step after it (bounds,
// authentication, limits, idempotency, result codes, the proxy) reads a
// text call as the binary call it carries; the backend speaks binary only.
//
// It is the step (an http.Handler around the chain), not the codec: the
// encoding is wire's (wire.TextReader, wire.TextWriter).
package webtext

import (
	"fmt"
	"net/http"

	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/wire"
)

// ErrMalformed is what a read of a text body returns when the body is not
// base64 (padded chunks, one after another). It wraps reqbody.ErrMalformed,
// so that the chain refuses the call as invalid_argument.
var ErrMalformed = fmt.Errorf("%w: grpc-web-text is not base64", reqbody.ErrMalformed)

// Wrap returns next behind the translation: a text call reaches next as a
// binary one, and its answer leaves as text. Other calls pass untouched.
func Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, ok := wire.TextCall(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Set("Content-Type", wire.BinaryType(sub))
		r.Header.Del("Content-Length")
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = wire.NewTextReader(r.Body, ErrMalformed)
			r.ContentLength = -1 // unknown until decoded; the size bound counts decoded bytes
		}
		tw := wire.NewTextWriter(w)
		defer tw.End()
		next.ServeHTTP(tw, r)
	})
}
