package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// Loops: an edge whose upstream leads back to itself (upstream.url names
// the edge, its Service, or another proxy in front of it) would forward a
// call to itself again and again, each pass charging the caller's limits
// and adding headers to the answer, until the limits or a header bound
// ended it. So every call and health check the edge sends names the edge
// in its Via header (RFC 9110 7.6.3), by a pseudonym of its own, and the
// edge refuses a call whose Via names it already: it passed this edge once.

// NewPseudonym returns a name for Via that no other edge process has:
// "orgedge-" and 12 random hex digits. Replicas get different names, so
// that an edge in front of another edge is no loop; a loop through
// several replicas is refused when it comes back to one it passed.
func NewPseudonym() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "orgedge-" + hex.EncodeToString(b[:])
}

// CameBack reports whether h's Via names pseudonym: the call passed this
// edge already.
func CameBack(h http.Header, pseudonym string) bool {
	if pseudonym == "" {
		return false
	}
	for _, v := range h["Via"] {
		if strings.Contains(v, pseudonym) {
			return true
		}
	}
	return false
}

// via is a proxy's Via entry by the protocol it received a call in, each
// as a header value of its own: a call without Via (most) gets it as it is,
// without an allocation; nothing changes a forwarded call's header values.
type via struct{ h1, h2 []string }

func newVia(pseudonym string) via {
	if pseudonym == "" {
		return via{}
	}
	return via{h1: []string{"1.1 " + pseudonym}, h2: []string{"2 " + pseudonym}}
}

// entry returns the Via entry for r's protocol (nil: none).
func (v via) entry(r *http.Request) []string {
	if r.ProtoMajor == 2 {
		return v.h2
	}
	return v.h1
}
