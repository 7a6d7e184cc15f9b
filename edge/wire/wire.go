// Package wire reads the message of a unary call's answer in whichever
// protocol it came (Connect, gRPC, gRPC-Web), for the few steps of the edge
// that must know what the backend answered (quotas learn an environment's
// id). It does not decompress: the edge asks the backend for identity
// encoding on those calls.
package wire

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/edge/classify"
)

// ErrFailed means the call did not succeed: there is no message to read.
var ErrFailed = errors.New("wire: the call failed")

// CompressionHeaders are the request headers by which a client accepts a
// compressed answer; the edge removes them on calls whose answer it reads.
var CompressionHeaders = []string{"Accept-Encoding", "Connect-Accept-Encoding", "Grpc-Accept-Encoding"}

// UnaryMessage decodes into msg the message of a successful unary answer.
// res's body has been read into body (to EOF, so that gRPC trailers are in
// res.Trailer). It returns ErrFailed when the answer is an error.
func UnaryMessage(c classify.Call, res *http.Response, body []byte, msg proto.Message) error {
	if res.StatusCode != http.StatusOK {
		return ErrFailed
	}
	if enc := res.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return fmt.Errorf("wire: compressed answer (%s)", enc)
	}
	if enc := res.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		return fmt.Errorf("wire: compressed answer (%s)", enc)
	}
	var payload []byte
	switch c.Protocol {
	case classify.GRPC:
		if grpcStatus(res.Header, res.Trailer) != "0" {
			return ErrFailed
		}
		frames, err := envelopes(body)
		if err != nil || len(frames) != 1 || frames[0].flags != 0 {
			return fmt.Errorf("wire: gRPC answer is not one message: %v", err)
		}
		payload = frames[0].data
	case classify.GRPCWeb:
		if strings.HasPrefix(res.Header.Get("Content-Type"), "application/grpc-web-text") {
			decoded, err := base64.StdEncoding.DecodeString(string(body))
			if err != nil {
				return fmt.Errorf("wire: gRPC-Web text answer: %w", err)
			}
			body = decoded
		}
		frames, err := envelopes(body)
		if err != nil {
			return err
		}
		var trailer http.Header
		for _, f := range frames {
			switch {
			case f.flags&0x80 != 0:
				trailer = parseTrailer(f.data)
			case payload == nil:
				payload = f.data
			default:
				return errors.New("wire: gRPC-Web answer has more than one message")
			}
		}
		if grpcStatus(res.Header, trailer) != "0" || payload == nil {
			return ErrFailed
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

// parseTrailer reads a gRPC-Web trailer frame: "key: value\r\n" lines.
func parseTrailer(b []byte) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(string(b), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(v))
		}
	}
	return h
}

// grpcStatus finds grpc-status in the trailers, or in the headers of a
// trailers-only answer.
func grpcStatus(header, trailer http.Header) string {
	if s := trailer.Get("Grpc-Status"); s != "" {
		return s
	}
	return header.Get("Grpc-Status")
}
