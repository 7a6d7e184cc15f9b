package authn

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddress finds the address of a call's client, the one every
// per-address bound counts by: the socket peer (which the API listener has
// already replaced by the client named in a trusted proxy's PROXY protocol
// header), or, when the peer is one of the trusted proxies, the address the
// proxy wrote in Header. A header from any other peer is ignored: a client
// could write any address there.
//
// A call that a trusted proxy sent for itself (no header, or a header that
// names only trusted proxies) has no client address: the zero Addr, which
// no per-address bound counts. A proxy carries many clients; bounding its
// own address would make one client's misbehaviour everyone's.
type ClientAddress struct {
	// Header holds the client's address as the proxy sets it: X-Real-IP,
	// X-Forwarded-For, Forwarded (RFC 7239, its for= parameters), or
	// another header holding one address or a list. In a list, the entries
	// are read from the last (the one the nearest proxy appended) towards
	// the first, and the first that is not a trusted proxy is the client:
	// entries further left were written by the client or by proxies not
	// trusted, and could say anything. Empty: the peer is the client.
	Header string
	// TrustedProxies are the peers whose Header is believed.
	TrustedProxies []netip.Prefix
}

// maxForwardedHops bounds the entries of a header read, right to left,
// looking for the client: a chain of trusted proxies is never that long.
const maxForwardedHops = 16

// Of returns the client address of r, or the zero Addr when r's peer
// address cannot be read or the call is a trusted proxy's own.
func (c ClientAddress) Of(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if !c.Trusted(peer) {
		return peer
	}
	if c.Header == "" {
		return netip.Addr{}
	}
	vals := r.Header.Values(c.Header)
	forwarded := strings.EqualFold(c.Header, "Forwarded")
	hops := 0
	for i := len(vals) - 1; i >= 0; i-- {
		v := vals[i]
		for v != "" && hops < maxForwardedHops {
			entry := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			if strings.TrimSpace(entry) == "" {
				continue
			}
			hops++
			if forwarded {
				entry = forwardedFor(entry)
			}
			a, ok := parseHop(entry)
			if !ok {
				// Not an address (garbage, "unknown", an obfuscated
				// name): what is left of it cannot be told.
				return netip.Addr{}
			}
			if !c.Trusted(a) {
				return a
			}
		}
	}
	return netip.Addr{}
}

// forwardedFor returns the for= parameter of one element of a Forwarded
// header (RFC 7239), unquoted; "" when it has none.
func forwardedFor(element string) string {
	for _, pair := range strings.Split(element, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// parseHop reads one entry: an address, with or without a port, an IPv6
// one possibly in brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// Trusted reports whether a is one of the trusted proxies.
func (c ClientAddress) Trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
