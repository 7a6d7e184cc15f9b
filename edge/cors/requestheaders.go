package cors

import (
	"net/http"
	"slices"
	"strings"
)

// maxRequestHeaders bounds the names of one Access-Control-Request-Headers
// the step sorts: a page sends a dozen at most. A longer list goes to
// rs/cors as it came, which allows it only if it is already in its form.
const maxRequestHeaders = 64

// withRequestHeadersInOrder returns the preflight r with its
// Access-Control-Request-Headers as one list of lower-case names, sorted,
// each once: the only form rs/cors (v1.11) accepts, which is what the
// Fetch standard makes browsers send. Header names are case-insensitive
// and the list's order means nothing (RFC 9110), and clients other than
// today's browsers (an older one, a proxy that rewrites the header, a
// test tool) send them in any order and case; they must not be refused for
// it. r is returned unchanged when it has no such header or too many
// names.
func withRequestHeadersInOrder(r *http.Request) *http.Request {
	values, ok := r.Header["Access-Control-Request-Headers"]
	if !ok {
		return r
	}
	var names []string
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.Trim(name, " \t"); name == "" {
				continue
			}
			if len(names) == maxRequestHeaders {
				return r
			}
			names = append(names, strings.ToLower(name))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	r = r.Clone(r.Context())
	r.Header["Access-Control-Request-Headers"] = []string{strings.Join(names, ",")}
	return r
}
