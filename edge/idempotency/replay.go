package idempotency

import (
	"net/http"
)

// notReplayed are the response headers that describe the request that got
// them, or the connection, rather than the call's outcome: a replay carries
// the current request's own, if any.
var notReplayed = map[string]bool{
	"Connection":            true,
	"Keep-Alive":            true,
	"Proxy-Connection":      true,
	"Proxy-Authenticate":    true,
	"Te":                    true,
	"Transfer-Encoding":     true,
	"Upgrade":               true,
	"Date":                  true,
	"X-Request-Id":          true,
	HeaderReplayed:          true,
	"X-Ratelimit-Limit":     true,
	"X-Ratelimit-Remaining": true,
	"X-Ratelimit-Reset":     true,
	"Ratelimit":             true,
	"Ratelimit-Policy":      true,
}

// stored returns the headers to keep from those the answer went out with.
func stored(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vv := range h {
		if !notReplayed[http.CanonicalHeaderKey(k)] {
			out[k] = vv
		}
	}
	return out
}

// replay writes a kept answer as the first went out through capture: the
// headers added to those the edge set, the status, the body and a flush
// (none for an empty body), then the trailers, declared ones under their
// names and others with http.TrailerPrefix. So net/http frames it as it
// framed the first: with the same Content-Length, or chunked.
//
// When w has a SetReplayedCode(string) method, replay tells it the code the
// answer was stored with, for metrics and logs: the HTTP status alone does
// not tell every code apart.
func replay(w http.ResponseWriter, res *response) {
	if cw, ok := w.(interface{ SetReplayedCode(string) }); ok && res.code != "" {
		cw.SetReplayedCode(res.code)
	}
	h := w.Header()
	for k, vv := range res.header {
		h[k] = append(h[k], vv...)
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(res.status)
	if len(res.body) > 0 {
		_, _ = w.Write(res.body)
		_ = http.NewResponseController(w).Flush()
	}
	declared := declaredTrailers(res.header)
	for k, vv := range res.trailer {
		if declared[k] {
			h[k] = vv
		} else {
			h[http.TrailerPrefix+k] = vv
		}
	}
}
