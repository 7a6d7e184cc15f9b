package bodydeadline

import "encoding/binary"

// envelopePrefix is the length of an envelope's prefix: flags, then the
// payload's length as a big-endian 32-bit number (Connect streams, gRPC,
// gRPC-Web).
const envelopePrefix = 5

// envelopes follows where a stream's messages begin and end as its bytes go
// by, in pieces of any size, without reading or keeping them: all a body's
// deadline needs. It is here, not taken from the edge's wire package,
// because the backend uses this package too and must not depend on the
// edge; reading what a message says is wire's.
type envelopes struct {
	head    [envelopePrefix]byte
	inHead  int    // bytes of the current prefix seen
	left    uint32 // payload bytes of the current message still to come
	started uint64 // messages begun
}

// feed follows p, the next bytes of the body.
func (e *envelopes) feed(p []byte) {
	for len(p) > 0 {
		if e.left == 0 {
			if e.inHead == 0 {
				e.started++
			}
			n := copy(e.head[e.inHead:], p)
			e.inHead += n
			p = p[n:]
			if e.inHead < envelopePrefix {
				return
			}
			e.inHead = 0
			e.left = binary.BigEndian.Uint32(e.head[1:])
			continue
		}
		n := min(uint32(len(p)), e.left)
		e.left -= n
		p = p[n:]
	}
}

// partial reports whether a message has begun and is not whole yet.
func (e *envelopes) partial() bool { return e.inHead > 0 || e.left > 0 }
