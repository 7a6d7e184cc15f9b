// Package webtext translates gRPC-Web's text mode (application/grpc-web-text,
// +proto and +json: base64 of the binary protocol's bytes) at the edge:
// the request body is decoded toward the chain and the backend, which see
// binary gRPC-Web, and the answer is encoded back, flushed message by
// message, with the text content type. Every step after it (bounds,
// authentication, limits, idempotency, result codes, the proxy) reads a
// text call as the binary call it carries; the backend speaks binary only.
//
// It is not a codec of messages: it moves bytes between two encodings of
// the same envelopes.
package webtext

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/wire"
)

const (
	binaryType = "application/grpc-web"
	textType   = "application/grpc-web-text"
)

// ErrMalformed is what a read of a text body returns when the body is not
// base64 (padded chunks, one after another). It wraps reqbody.ErrMalformed,
// so that the chain refuses the call as invalid_argument.
var ErrMalformed = fmt.Errorf("%w: grpc-web-text is not base64", reqbody.ErrMalformed)

// Wrap returns next behind the translation: a text call reaches next as a
// binary one, and its answer leaves as text. Other calls pass untouched.
func Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, ok := textCodec(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Set("Content-Type", binaryType+sub)
		r.Header.Del("Content-Length")
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &decoder{src: r.Body}
			r.ContentLength = -1 // unknown until decoded; the size bound counts decoded bytes
		}
		tw := &encoder{ResponseWriter: w}
		defer tw.flushPending()
		next.ServeHTTP(tw, r)
	})
}

// textCodec returns the codec suffix ("", "+proto" or "+json") of a text
// call's content type; ok is false for any other request.
func textCodec(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	// A cheap look first: every call of the API passes here, and only text
	// calls need their media type read.
	if ct := r.Header.Get("Content-Type"); len(ct) < len(textType) || !strings.EqualFold(ct[:len(textType)], textType) {
		return "", false
	}
	mt, ok := wire.MediaType(r.Header)
	if !ok {
		return "", false
	}
	switch sub := strings.TrimPrefix(mt, textType); sub {
	case "", "+proto", "+json":
		return sub, true
	}
	return "", false
}

// decoder decodes a text body: base64 in chunks, each padded, one after
// another, as clients send a body in several writes. It reads at most 4 KiB
// of base64 at a time and accepts nothing but the base64 alphabet and its
// padding, so that the encoded bytes it reads stay within 4/3 of the
// decoded bytes that the size bound counts.
type decoder struct {
	src io.ReadCloser
	in  [4096]byte
	n   int    // undecoded bytes in in: fewer than 4 between reads
	out []byte // decoded, not yet read
	buf [3072]byte
	err error
}

func (d *decoder) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		m, err := d.src.Read(d.in[d.n:])
		d.n += m
		whole := d.n / 4 * 4
		out, derr := decodeChunks(d.buf[:0], d.in[:whole])
		d.n = copy(d.in[:], d.in[whole:d.n])
		d.out = out
		switch {
		case derr != nil:
			d.err = ErrMalformed
		case err == io.EOF && d.n != 0:
			d.err = ErrMalformed // a chunk cut short
		case err != nil:
			d.err = err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

func (d *decoder) Close() error { return d.src.Close() }

// decodeChunks appends to dst the bytes that src, whole quartets of base64
// in padded chunks, encodes. Each chunk ends at a quartet with padding.
func decodeChunks(dst, src []byte) ([]byte, error) {
	for len(src) > 0 {
		end := len(src)
		if i := bytes.IndexByte(src, '='); i >= 0 {
			end = (i/4 + 1) * 4
		}
		chunk := src[:end]
		for _, c := range chunk {
			if !isBase64(c) {
				return dst, ErrMalformed
			}
		}
		n, err := base64.StdEncoding.Decode(dst[len(dst):cap(dst)], chunk)
		if err != nil {
			return dst, ErrMalformed
		}
		dst = dst[:len(dst)+n]
		src = src[end:]
	}
	return dst, nil
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// encoder encodes an answer written in binary gRPC-Web as text. Whole
// groups of 3 bytes are encoded as they come; the 1 or 2 bytes left over
// wait for the next write, or are encoded with padding when the answer is
// flushed (every message of a stream) or ends. An answer that is not
// gRPC-Web (a plain HTTP error) passes as it is.
type encoder struct {
	http.ResponseWriter
	wroteHeader, encode bool
	pending             [3]byte
	npending            int
}

func (e *encoder) WriteHeader(status int) {
	if e.wroteHeader || status < 200 {
		e.ResponseWriter.WriteHeader(status)
		return
	}
	e.wroteHeader = true
	h := e.Header()
	ct := h.Get("Content-Type")
	if lower := strings.ToLower(ct); strings.HasPrefix(lower, binaryType) && !strings.HasPrefix(lower, textType) {
		h.Set("Content-Type", textType+ct[len(binaryType):])
		h.Del("Content-Length")
		e.encode = true
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *encoder) Write(p []byte) (int, error) {
	if !e.wroteHeader {
		e.WriteHeader(http.StatusOK)
	}
	if !e.encode {
		return e.ResponseWriter.Write(p)
	}
	n := len(p)
	if e.npending > 0 {
		k := copy(e.pending[e.npending:], p)
		e.npending += k
		p = p[k:]
		if e.npending < 3 {
			return n, nil
		}
		if err := e.emit(e.pending[:3]); err != nil {
			return 0, err
		}
		e.npending = 0
	}
	whole := len(p) / 3 * 3
	if whole > 0 {
		if err := e.emit(p[:whole]); err != nil {
			return 0, err
		}
	}
	e.npending = copy(e.pending[:], p[whole:])
	return n, nil
}

// emit writes b in base64, padded if b is not whole groups of 3.
func (e *encoder) emit(b []byte) error {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	base64.StdEncoding.Encode(out, b)
	_, err := e.ResponseWriter.Write(out)
	return err
}

// flushPending ends the current chunk: the bytes left over, padded.
func (e *encoder) flushPending() {
	if e.npending > 0 {
		_ = e.emit(e.pending[:e.npending])
		e.npending = 0
	}
}

// Flush ends the chunk and sends it: a stream's message reaches the client
// whole, decodable on its own.
func (e *encoder) Flush() {
	e.flushPending()
	_ = http.NewResponseController(e.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines of the body bounds).
func (e *encoder) Unwrap() http.ResponseWriter { return e.ResponseWriter }
