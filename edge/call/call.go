// Package call holds what one call carries through the chain: the writer
// that records what the edge answered (Recorder), the state the proxy's
// hooks read back (State), and the names its result is counted under
// (outcomes, unavailable reasons, deadline origins). The chain makes both
// for every call before any step runs; a request without them did not come
// through the chain, and Of panics on it rather than invent fresh state.
//
// It is not where a call's result is worked out from the bytes that went
// out (wire.Of, which Recorder.Result asks), nor where it is counted
// (edge/observe).
package call

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/reqbody"
	"github.com/orgedge/edge/edge/wire"
)

// State is what an admitted call carries through the proxy's hooks.
type State struct {
	Call     wire.Call
	Rec      *Recorder
	Admitted *limits.Admission
	// Expires is a stream's end: its token's expiry plus the clock skew
	// the edge allows (zero: none).
	Expires time.Time
	// Body is the request body's bounds, to tell a body the edge cut from
	// a backend failure.
	Body *reqbody.Body
	// ReadOnly: the operation table marks the procedure read_only, so the
	// proxy may send it again (proxy.PoolOptions.ReadOnly).
	ReadOnly bool
}

type stateKey struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *State) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

// Of is the state of r's call. It panics if r did not come through the
// chain: every hook that asks runs inside it.
func Of(r *http.Request) *State {
	s, _ := r.Context().Value(stateKey{}).(*State)
	if s == nil {
		panic("edge/call: request without call state: it did not come through the chain")
	}
	return s
}

// RequestID keeps a well-formed client request id, or makes one.
func RequestID(in string) string {
	if wellFormedID(in) {
		return in
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// wellFormedID accepts 1-128 of A-Z a-z 0-9 - _ . : (a UUID, a ULID, a trace id).
func wellFormedID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// Clip shortens a client-sent string for a log line or an error message.
func Clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
