package authn

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddress finds the address of a call's client: the socket peer, or,
// when the peer is one of the trusted proxies, the address the proxy wrote
// in Header. A header from any other peer is ignored: a client could write
// any address there.
type ClientAddress struct {
	// Header holds the client's address as the proxy sets it: X-Real-IP, or
	// X-Forwarded-For (whose last entry, the one the nearest proxy appended,
	// is used). Empty: the peer is the client.
	Header string
	// TrustedProxies are the peers whose Header is believed.
	TrustedProxies []netip.Prefix
}

// Of returns the client address of r, or the zero Addr when r's peer
// address cannot be read.
func (c ClientAddress) Of(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if c.Header == "" || !c.trusted(peer) {
		return peer
	}
	vals := r.Header.Values(c.Header)
	if len(vals) == 0 {
		return peer
	}
	// The last value, and its last entry: what the nearest proxy wrote.
	v := vals[len(vals)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	a, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil {
		return peer
	}
	return a.Unmap()
}

func (c ClientAddress) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
