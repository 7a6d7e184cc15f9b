package wire

import (
	"encoding/binary"
	"net/http"
	"net/textproto"
	"strings"
)

// Flags of an envelope's first byte. Connect streaming, gRPC and gRPC-Web
// frame each message as flags, a big-endian 32-bit length, then the
// payload.
const (
	FlagCompressed byte = 0x01 // the payload is compressed with the call's encoding
	FlagEndStream  byte = 0x02 // Connect: the end-of-stream message ({"error": …})
	FlagTrailer    byte = 0x80 // gRPC-Web: the trailers frame
)

// envelopeHeader is the length of an envelope's prefix.
const envelopeHeader = 5

// MaxEndFrameBytes bounds the end frame [Frames] keeps (trailers, or
// Connect's end-of-stream message), as it came, compressed or not.
const MaxEndFrameBytes = 64 << 10

// Envelope frames payload with flags.
func Envelope(flags byte, payload []byte) []byte {
	out := make([]byte, envelopeHeader+len(payload))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:envelopeHeader], uint32(len(payload)))
	copy(out[envelopeHeader:], payload)
	return out
}

// Frames follows the envelopes of a body as its bytes go by, in pieces of
// any size, without keeping them; it keeps only the end frame: the first
// frame whose flags have a bit of End set (FlagTrailer for gRPC-Web,
// FlagEndStream for Connect streams). The zero value follows a body
// without keeping any frame. A Frames is not safe for concurrent use.
type Frames struct {
	// End selects the end frame by its flags; 0: none is kept.
	End byte

	head    [envelopeHeader]byte
	inHead  int    // bytes of the current prefix seen
	left    uint32 // payload bytes of the current frame still to come
	keeping bool   // the current frame is the end frame
	started uint64 // frames begun

	endFlags byte
	end      []byte
	ended    bool // the whole end frame is in
	bad      bool // a frame after the end frame, or an end frame too large

	// keepFirst keeps the first frame that is not the end frame too: the
	// message of a whole unary answer, which UnaryMessage reads.
	keepFirst              bool
	keepingFirst, hasFirst bool
	firstFlags             byte
	first                  []byte
}

// Feed follows p, the next bytes of the body.
func (f *Frames) Feed(p []byte) {
	for len(p) > 0 && !f.bad {
		if f.left == 0 && f.inHead < envelopeHeader {
			if f.inHead == 0 {
				f.started++
			}
			n := copy(f.head[f.inHead:], p)
			f.inHead += n
			p = p[n:]
			if f.inHead < envelopeHeader {
				return
			}
			f.left = binary.BigEndian.Uint32(f.head[1:])
			if f.ended {
				f.bad = true // nothing follows the end frame
				return
			}
			f.keeping = f.End != 0 && f.head[0]&f.End != 0
			if f.keeping {
				if f.left > MaxEndFrameBytes {
					f.bad = true
					return
				}
				f.endFlags = f.head[0]
				f.end = make([]byte, 0, f.left)
			} else if f.keepFirst && !f.hasFirst {
				f.keepingFirst, f.hasFirst = true, true
				f.firstFlags = f.head[0]
			}
			if f.left == 0 {
				f.frameDone()
			}
			continue
		}
		n := min(uint32(len(p)), f.left)
		if f.keeping {
			f.end = append(f.end, p[:n]...)
		} else if f.keepingFirst {
			f.first = append(f.first, p[:n]...)
		}
		f.left -= n
		p = p[n:]
		if f.left == 0 {
			f.frameDone()
		}
	}
}

func (f *Frames) frameDone() {
	f.inHead = 0
	f.keepingFirst = false
	if f.keeping {
		f.keeping, f.ended = false, true
	}
}

// Started counts the frames begun so far (a frame begins with the first
// byte of its prefix).
func (f *Frames) Started() uint64 { return f.started }

// Partial reports whether a frame has begun and is not whole yet.
func (f *Frames) Partial() bool { return f.inHead > 0 || f.left > 0 }

// EndFrame returns the payload of the whole end frame, decompressed with
// encoding (the call's Grpc-Encoding or Connect-Content-Encoding) when its
// flags say it is compressed, bounded by MaxMessageBytes once
// decompressed. ok is false when there is no whole end frame, or the body
// did not end at a frame's end, or the frame cannot be read.
func (f *Frames) EndFrame(encoding string) (payload []byte, ok bool) {
	if f.bad || !f.ended || f.Partial() {
		return nil, false
	}
	out, err := open(f.endFlags, f.end, encoding)
	return out, err == nil
}

// Trailer reads a gRPC-Web trailers frame's payload: "key: value\r\n"
// lines.
func Trailer(payload []byte) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(string(payload), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(v))
		}
	}
	return h
}
