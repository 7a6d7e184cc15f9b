package wire

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
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
// res.Trailer). It returns ErrFailed when the answer is an error; any other
// error means the call succeeded but its message could not be read (an
// unknown compression, ErrTooLarge, a malformed body).
func UnaryMessage(c Call, res *http.Response, body []byte, msg proto.Message) error {
	if res.StatusCode != http.StatusOK {
		return ErrFailed
	}
	if enc := res.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
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
		if grpcStatus(res.Header, res.Trailer) != "0" {
			return ErrFailed
		}
		frames, err := envelopes(body)
		if err != nil || len(frames) != 1 || frames[0].flags&0x80 != 0 {
			return fmt.Errorf("wire: gRPC answer is not one message: %v", err)
		}
		if payload, err = frames[0].message(res.Header.Get("Grpc-Encoding")); err != nil {
			return err
		}
	case GRPCWeb:
		// Never text: the backend speaks binary gRPC-Web only, and the edge
		// translates text at its door (TextReader, TextWriter).
		frames, err := envelopes(body)
		if err != nil {
			return err
		}
		var trailer http.Header
		var message *frame
		for i, f := range frames {
			switch {
			case f.flags&0x80 != 0:
				// The trailer frame may be compressed too (flag 0x01).
				data, err := f.message(res.Header.Get("Grpc-Encoding"))
				if err != nil {
					return err
				}
				trailer = Trailer(data)
			case message == nil:
				message = &frames[i]
			default:
				return errors.New("wire: gRPC-Web answer has more than one message")
			}
		}
		if grpcStatus(res.Header, trailer) != "0" || message == nil {
			return ErrFailed
		}
		if payload, err = message.message(res.Header.Get("Grpc-Encoding")); err != nil {
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

type frame struct {
	flags byte
	data  []byte
}

// message is the frame's data, decompressed with encoding when the frame's
// compressed flag (0x01) is set.
func (f frame) message(encoding string) ([]byte, error) {
	if f.flags&0x01 == 0 {
		return f.data, nil
	}
	if encoding == "" || encoding == "identity" {
		return nil, errors.New("wire: compressed message without Grpc-Encoding")
	}
	return decompress(encoding, f.data)
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

// envelopes splits a body into gRPC length-prefixed frames.
func envelopes(b []byte) ([]frame, error) {
	var out []frame
	for len(b) > 0 {
		if len(b) < 5 {
			return nil, errors.New("wire: truncated frame header")
		}
		n := binary.BigEndian.Uint32(b[1:5])
		if uint64(n) > uint64(len(b)-5) {
			return nil, errors.New("wire: truncated frame")
		}
		out = append(out, frame{flags: b[0], data: b[5 : 5+n]})
		b = b[5+n:]
	}
	return out, nil
}

// grpcStatus finds grpc-status in the trailers, or in the headers of a
// trailers-only answer.
func grpcStatus(header, trailer http.Header) string {
	if s := trailer.Get("Grpc-Status"); s != "" {
		return s
	}
	return header.Get("Grpc-Status")
}
