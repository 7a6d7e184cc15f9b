package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"

	"github.com/orgedge/edge/edge/wire"
)

// maxKeyLen bounds a key, after unquoting.
const maxKeyLen = 255

// parseKey reads the one Idempotency-Key field value: a structured-field
// string ("…", RFC 8941 §3.3.3, with \" and \\ escapes) as
// draft-ietf-httpapi-idempotency-key-header writes it, or the same
// characters bare. Either way the key is 1-255 printable ASCII characters
// (space to ~), so "abc" and abc are one key.
func parseKey(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	v := values[0]
	if strings.HasPrefix(v, `"`) {
		var ok bool
		if v, ok = unquote(v); !ok {
			return "", false
		}
	}
	if len(v) == 0 || len(v) > maxKeyLen {
		return "", false
	}
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", false
		}
	}
	return v, true
}

// unquote reads a structured-field string.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[len(s)-1] != '"' {
		return "", false
	}
	in := s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '\\':
			i++
			if i == len(in) || in[i] != '"' && in[i] != '\\' {
				return "", false
			}
			b.WriteByte(in[i])
		case '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// entryKey names the Redis entry of (subject, procedure, key). The hash tag
// is a hash of the subject, so that every key of a subject shares a cluster
// slot whatever the subject's characters ("{" and "}" included).
func entryKey(subject, procedure, key string) string {
	tag := sha256.Sum256([]byte(subject))
	h := sha256.New()
	writeParts(h, subject, procedure, key)
	return "idem:{" + hex.EncodeToString(tag[:8]) + "}:" + hex.EncodeToString(h.Sum(nil))
}

// fingerprint tells one request from another under the same key: the
// procedure, the content type, the query (a Connect GET carries its message
// there) and the body, byte for byte.
func fingerprint(procedure, contentType, query string, body []byte) string {
	h := sha256.New()
	writeParts(h, procedure, contentType, query, string(body))
	return hex.EncodeToString(h.Sum(nil))
}

// writeParts hashes each part with its length first, so that no two lists
// of parts hash alike by shifting bytes from one part to the next.
func writeParts(h hash.Hash, parts ...string) {
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
}

// contentType is how a request's messages are encoded, as the error for a
// duplicate sent another way names it: the media type without parameters,
// or for a Connect GET its encoding.
func contentType(r *http.Request) string {
	if r.Method == http.MethodGet {
		return "GET encoding=" + clip(r.URL.Query().Get("encoding"))
	}
	if mt, ok := wire.MediaType(r.Header); ok {
		return mt
	}
	return clip(strings.ToLower(wire.FirstValue(r.Header["Content-Type"])))
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
