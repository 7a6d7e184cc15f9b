package wire

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
)

// gRPC-Web's text mode is base64 of the binary protocol's bytes: the same
// envelopes, in another encoding. The edge translates it at its door
// (edge/webtext) so that everything after sees binary gRPC-Web; these are
// the two halves of that translation.

const (
	binaryType = "application/grpc-web"
	textType   = "application/grpc-web-text"
)

// TextCall returns the codec suffix ("", "+proto" or "+json") of a gRPC-Web
// text call's content type; ok is false for any other request.
func TextCall(r *http.Request) (suffix string, ok bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	// A cheap look first: every call of the API passes here, and only text
	// calls need their media type read.
	if ct := FirstValue(r.Header["Content-Type"]); len(ct) < len(textType) || !strings.EqualFold(ct[:len(textType)], textType) {
		return "", false
	}
	m, ok := MediaOf(r.Header)
	if !ok || !m.Text {
		return "", false
	}
	return m.Type[len(textType):], true
}

// BinaryType is the binary gRPC-Web content type of codec suffix (see
// TextCall).
func BinaryType(suffix string) string { return binaryType + suffix }

// TextReader decodes a text body: base64 in chunks, each padded, one after
// another, as clients send a body in several writes. It reads at most 4 KiB
// of base64 at a time and accepts nothing but the base64 alphabet and its
// padding, so that the encoded bytes it reads stay within 4/3 of the
// decoded bytes that a size bound counts.
type TextReader struct {
	src       io.ReadCloser
	malformed error
	in        [4096]byte
	n         int    // undecoded bytes in in: fewer than 4 between reads
	out       []byte // decoded, not yet read
	buf       [3072]byte
	err       error
}

// NewTextReader decodes src. A read of bytes that are not base64 fails with
// malformed: the chain's error for a body that does not decode
// (reqbody.ErrMalformed, of a package wire cannot import).
func NewTextReader(src io.ReadCloser, malformed error) *TextReader {
	return &TextReader{src: src, malformed: malformed}
}

func (d *TextReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		m, err := d.src.Read(d.in[d.n:])
		d.n += m
		whole := d.n / 4 * 4
		out, ok := decodeChunks(d.buf[:0], d.in[:whole])
		d.n = copy(d.in[:], d.in[whole:d.n])
		d.out = out
		switch {
		case !ok:
			d.err = d.malformed
		case err == io.EOF && d.n != 0:
			d.err = d.malformed // a chunk cut short
		case err != nil:
			d.err = err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// Close closes the body it decodes.
func (d *TextReader) Close() error { return d.src.Close() }

// decodeChunks appends to dst the bytes that src, whole quartets of base64
// in padded chunks, encodes; ok is false when src is not that. Each chunk
// ends at a quartet with padding.
func decodeChunks(dst, src []byte) (_ []byte, ok bool) {
	for len(src) > 0 {
		end := len(src)
		if i := bytes.IndexByte(src, '='); i >= 0 {
			end = (i/4 + 1) * 4
		}
		chunk := src[:end]
		for _, c := range chunk {
			if !isBase64(c) {
				return dst, false
			}
		}
		n, err := base64.StdEncoding.Decode(dst[len(dst):cap(dst)], chunk)
		if err != nil {
			return dst, false
		}
		dst = dst[:len(dst)+n]
		src = src[end:]
	}
	return dst, true
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// TextWriter encodes an answer written in binary gRPC-Web as text. Whole
// groups of 3 bytes are encoded as they come; the 1 or 2 bytes left over
// wait for the next write, or are encoded with padding when the answer is
// flushed (every message of a stream) or ends (End). An answer that is not
// gRPC-Web (a plain HTTP error) passes as it is.
type TextWriter struct {
	http.ResponseWriter
	wroteHeader, encode bool
	pending             [3]byte
	npending            int
}

// NewTextWriter encodes what is written to it as text, toward w.
func NewTextWriter(w http.ResponseWriter) *TextWriter { return &TextWriter{ResponseWriter: w} }

// WriteHeader sets the text content type on a binary gRPC-Web answer.
func (e *TextWriter) WriteHeader(status int) {
	if e.wroteHeader || status < 200 {
		e.ResponseWriter.WriteHeader(status)
		return
	}
	e.wroteHeader = true
	h := e.Header()
	if m, ok := MediaOf(h); ok && m.Protocol == GRPCWeb && !m.Text {
		h.Set("Content-Type", textType+m.Type[len(binaryType):])
		h.Del("Content-Length")
		e.encode = true
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *TextWriter) Write(p []byte) (int, error) {
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
func (e *TextWriter) emit(b []byte) error {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	base64.StdEncoding.Encode(out, b)
	_, err := e.ResponseWriter.Write(out)
	return err
}

// End ends the current chunk: the bytes left over, padded. The answer's
// handler calls it when it returns.
func (e *TextWriter) End() {
	if e.npending > 0 {
		_ = e.emit(e.pending[:e.npending])
		e.npending = 0
	}
}

// Flush ends the chunk and sends it: a stream's message reaches the client
// whole, decodable on its own.
func (e *TextWriter) Flush() {
	e.End()
	_ = http.NewResponseController(e.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines of the body bounds).
func (e *TextWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
