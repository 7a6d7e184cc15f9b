package wire

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ErrFailed means the call did not succeed: there is no message to read.
var ErrFailed = errors.New("wire: the call failed")

// CompressionHeaders are the request headers by which a client accepts a
// compressed answer; the edge removes them on calls whose answer it reads.
var CompressionHeaders = []string{"Accept-Encoding", "Connect-Accept-Encoding", "Grpc-Accept-Encoding"}

// MaxMessageBytes bounds a message once decompressed.
const MaxMessageBytes = 1 << 20

// ErrTooLarge means the answer's message, decompressed, passes
// MaxMessageBytes.
var ErrTooLarge = errors.New("wire: message too large to read")

// UnaryMessage decodes into msg the message of a successful unary answer.
// res's body has been read into body (to EOF, so that gRPC trailers are in
// res.Trailer), and read is what Of read of it (OfResponse): whether the
// call succeeded is Of's to say, not this function's. It returns ErrFailed
// when the answer is an error; any other error means the call succeeded
// but its message could not be read (an answer cut short, an unknown
// compression, ErrTooLarge, a malformed body).
func UnaryMessage(c Call, res *http.Response, body []byte, read Reading, msg proto.Message) error {
	switch {
	case read.Ending != Whole:
		return errors.New("wire: the answer is not whole")
	case read.Code != OK:
		return ErrFailed
	}
	if enc := FirstValue(res.Header["Content-Encoding"]); enc != "" && enc != "identity" {
		// Connect unary and HTTP/JSON: the whole body. (gRPC and gRPC-Web
		// compress per message, under Grpc-Encoding; a Content-Encoding on
		// them would be an HTTP layer the Transport undoes.)
		plain, err := decompress(enc, body)
		if err != nil {
			return err
		}
		body = plain
	}
	var payload []byte
	switch c.Protocol {
	case GRPC:
		f := Frames{End: FlagTrailer, keepFirst: true}
		f.Feed(body)
		if f.bad || f.Partial() || f.ended || f.Started() != 1 {
			return fmt.Errorf("wire: gRPC answer is not one message (%d frames)", f.Started())
		}
		var err error
		if payload, err = open(f.firstFlags, f.first, FirstValue(res.Header["Grpc-Encoding"])); err != nil {
			return err
		}
	case GRPCWeb:
		// Never text: the backend speaks binary gRPC-Web only, and the edge
		// translates text at its door (TextReader, TextWriter).
		f := Frames{End: FlagTrailer, keepFirst: true}
		f.Feed(body)
		if f.bad || f.Partial() {
			return errors.New("wire: gRPC-Web answer is not whole frames ending at its trailers")
		}
		messages := f.Started()
		if f.ended {
			messages--
		}
		switch {
		case messages > 1:
			return errors.New("wire: gRPC-Web answer has more than one message")
		case messages == 0:
			return ErrFailed // a success without its message: nothing to read
		}
		var err error
		if payload, err = open(f.firstFlags, f.first, FirstValue(res.Header["Grpc-Encoding"])); err != nil {
			return err
		}
	default:
		if !c.UnaryConnect {
			return errors.New("wire: not a unary call")
		}
		payload = body
	}
	if c.JSON {
		return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(payload, msg)
	}
	return proto.Unmarshal(payload, msg)
}

// open is a frame's payload, decompressed with encoding when its flags say
// it is compressed.
func open(flags byte, payload []byte, encoding string) ([]byte, error) {
	if flags&FlagCompressed == 0 {
		return payload, nil
	}
	if encoding == "" || encoding == "identity" {
		return nil, errors.New("wire: compressed message without Grpc-Encoding")
	}
	return decompress(encoding, payload)
}

// decompress inflates b, compressed with encoding, up to MaxMessageBytes.
// gzip is what connect-go and grpc-go servers offer; any other encoding is
// reported, not guessed.
func decompress(encoding string, b []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("wire: gzip: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, MaxMessageBytes+1))
		if err != nil {
			return nil, fmt.Errorf("wire: gzip: %w", err)
		}
		if len(out) > MaxMessageBytes {
			return nil, ErrTooLarge
		}
		return out, nil
	case "identity", "":
		return b, nil
	}
	return nil, fmt.Errorf("wire: unsupported compression %q", clip(encoding))
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
