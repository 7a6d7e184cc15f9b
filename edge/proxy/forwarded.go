package proxy

import (
	"context"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// forwarded is what the proxy changes in a call's header as it forwards
// it. For a transport that forwards the header itself (a HeaderForwarder:
// a Pool) it goes beside the call, as its context, instead of being
// applied to a copy of the header: the HTTP/1.1 leg then writes the
// forwarded header from the call's own map straight onto the connection
// (h1Call.write), and only the HTTP/2 leg makes a map of it (header).
// Every way goes through fields, the one header hygiene of every
// forwarded call.
type forwarded struct {
	context.Context
	// connection holds the client's Connection values: the headers they
	// name are not forwarded.
	connection []string
	via        []string // the edge's Via entry, after the client's (nil: none)
	deadline   callDeadline
	timed      bool // deadline is set
	te         bool // the client asked for trailers (Te: trailers)
	hasFor     bool // X-Forwarded-For is known
	// values holds X-Forwarded-For, -Host, -Proto, "trailers", and the
	// Grpc-Timeout and Connect-Timeout-Ms that fields sets ("": none):
	// each field's value is a window of it, with no room to grow into the
	// next.
	values [6]string
}

// HeaderForwarder is a transport that forwards a call's header itself,
// as a Pool does at each of its legs: the proxy hands it the call with the
// client's header and, in its context, what to change in it, which spares
// a copy of the header per call. A wrapper around a Pool says so too (and
// keeps the call's context); any other transport gets the forwarded header
// as a map of its own.
type HeaderForwarder interface {
	ForwardsHeader() bool
}

type forwardedKey struct{}

// Value makes f the call's context: it answers for forwardedKey.
func (f *forwarded) Value(key any) any {
	if _, ok := key.(forwardedKey); ok {
		return f
	}
	return f.Context.Value(key)
}

// forward returns a copy of r to forward: with r's header and, as its
// context, what to change in it when the transport forwards the header
// itself; else with the forwarded header.
func (p *Proxy) forward(r *http.Request) *http.Request {
	f := &forwarded{Context: r.Context(), connection: r.Header["Connection"], via: p.via.entry(r)}
	f.deadline, f.timed = r.Context().Value(deadlineKey{}).(callDeadline)
	for _, te := range r.Header["Te"] {
		if strings.Contains(strings.ToLower(te), "trailers") {
			f.te = true
			break
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		f.values[0], f.hasFor = ip, true
	}
	f.values[1] = r.Host
	f.values[2] = "http"
	if r.TLS != nil {
		f.values[2] = "https"
	}
	f.values[3] = "trailers"
	if p.forwardsHeader {
		return r.WithContext(f)
	}
	out := new(http.Request)
	*out = *r
	out.Header = f.header(r.Header)
	return out
}

// forwardedOf returns what the proxy changes in r's header, or nil for a
// call that did not come through a Proxy (a Pool's direct caller's).
func forwardedOf(r *http.Request) *forwarded {
	f, _ := r.Context().Value(forwardedKey{}).(*forwarded)
	return f
}

// fields calls emit with each field of the forwarded call's header, h
// being the call's as it reaches the leg: h's less the hop-by-hop headers
// (Te: trailers aside, which gRPC needs), those the client's Connection
// header names, the edge's internal ones and any Forwarded or
// X-Forwarded-*; then X-Forwarded-For, -Host and -Proto from what the edge
// saw, Via with the edge's entry after the client's, and the call's
// timeout header, which says what is left of its deadline as it leaves
// (set in f.values anew at each call of fields). A key may come twice
// (Via); emit must not change vs.
func (f *forwarded) fields(h http.Header, emit func(k string, vs []string)) {
	timeout := f.values[4:6:6] // Grpc-Timeout, Connect-Timeout-Ms ("" none)
	timeout[0], timeout[1] = "", ""
	if f.timed {
		ms := strconv.FormatInt(max(time.Until(f.deadline.at).Milliseconds(), 1), 10)
		// The other protocol's header, when the client sent it too, says
		// the same: the backend may read either.
		if f.deadline.grpc || f.passes(h, "Grpc-Timeout") {
			timeout[0] = ms + "m"
		}
		if !f.deadline.grpc || f.passes(h, "Connect-Timeout-Ms") {
			timeout[1] = ms
		}
	}
	for k, vs := range h {
		switch {
		case dropped(k), f.named(k):
		case k == "Grpc-Timeout" && timeout[0] != "", k == "Connect-Timeout-Ms" && timeout[1] != "":
		default:
			emit(k, vs)
		}
	}
	if f.te {
		emit("Te", f.values[3:4:4])
	}
	if f.hasFor {
		emit("X-Forwarded-For", f.values[0:1:1])
	}
	emit("X-Forwarded-Host", f.values[1:2:2])
	emit("X-Forwarded-Proto", f.values[2:3:3])
	if f.via != nil {
		emit("Via", f.via)
	}
	if timeout[0] != "" {
		emit("Grpc-Timeout", timeout[0:1:1])
	}
	if timeout[1] != "" {
		emit("Connect-Timeout-Ms", timeout[1:2:2])
	}
}

// passes reports that h has k and that k is not named by the client's
// Connection header.
func (f *forwarded) passes(h http.Header, k string) bool {
	_, ok := h[k]
	return ok && !f.named(k)
}

// named reports a header the client's Connection header names.
func (f *forwarded) named(k string) bool {
	for _, c := range f.connection {
		for c != "" {
			var name string
			name, c, _ = strings.Cut(c, ",")
			if strings.EqualFold(textproto.TrimString(name), k) {
				return true
			}
		}
	}
	return false
}

// header returns the forwarded call's header as a map of its own: h's
// fields (see fields), each value slice shared with h or f.
func (f *forwarded) header(h http.Header) http.Header {
	out := make(http.Header, len(h)+5)
	f.fields(h, func(k string, vs []string) {
		if have, ok := out[k]; ok {
			out[k] = append(have[:len(have):len(have)], vs...)
			return
		}
		out[k] = vs
	})
	return out
}
