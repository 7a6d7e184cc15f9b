package wire

import "net/http"

// HeaderValue is h.Get(key) for a key already in canonical form, as every
// header name the edge spells out is ("Content-Type", "Grpc-Timeout"): the
// map lookup without canonicalizing the key again. h.Get checks and
// canonicalizes every byte of the key first, which a dozen reads a call
// made a tenth of the edge's own header work (docs/benchmarks.md, "Header
// reads"). A key not in canonical form is never found: the names passed
// are checked by TestHeaderValueKeysAreCanonical.
func HeaderValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
