// Package apierror builds the errors the edge answers itself and writes them
// in the caller's protocol: Connect (unary and streaming), gRPC, gRPC-Web and
// plain HTTP/JSON. It also reshapes the backend's Connect JSON error bodies
// into the API specification's shape for JSON callers ([RewriteJSON]).
//
// Every error it builds carries exactly one google.rpc.ErrorInfo, as every
// error of the API does. For JSON callers each detail keeps Connect's "type"
// and base64 "value" and adds the protobuf JSON form of the detail as an Any
// ("@type" and the message's fields), so the body has the specification's
// shape and Connect clients still decode it.
//
// It does not decide which code or reason a refusal gets: the step of the
// chain that refuses does.
package apierror

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Domain is the ErrorInfo domain of the errors the edge answers itself. The
// backend's errors name the service that answered instead.
const Domain = "edge"

// An Option adds to an error built by [New].
type Option func(*options)

type options struct {
	meta    map[string]string
	details []proto.Message
	header  http.Header
}

// WithMetadata adds a key and value to the ErrorInfo's metadata (for example
// "required_roles"). A later value for the same key replaces an earlier one.
func WithMetadata(key, value string) Option {
	return func(o *options) {
		if o.meta == nil {
			o.meta = make(map[string]string)
		}
		o.meta[key] = value
	}
}

// WithDetail adds a detail after the ErrorInfo: a google.rpc.RetryInfo,
// QuotaFailure, BadRequest or any other message. A nil message, or an
// ErrorInfo (the error has exactly one, built from New's arguments), is
// ignored.
func WithDetail(msg proto.Message) Option {
	return func(o *options) {
		if msg == nil {
			return
		}
		if _, isInfo := msg.(*errdetails.ErrorInfo); isInfo {
			return
		}
		o.details = append(o.details, msg)
	}
}

// WithHeader adds a response header (for example WWW-Authenticate) to the
// error's metadata. [Write] sends it as an HTTP header to Connect unary and
// HTTP/JSON callers and as connect-go's error writer does to the others
// (trailers for gRPC and Connect streaming, headers for gRPC-Web). Protocol
// headers such as Content-Type are never sent.
func WithHeader(key, value string) Option {
	return func(o *options) {
		if o.header == nil {
			o.header = make(http.Header)
		}
		o.header.Add(key, value)
	}
}

// WithRetryAfter tells the caller when to try again: a google.rpc.RetryInfo
// detail and a Retry-After header. Both carry the same whole number of
// seconds, d rounded up and at least one, since the header cannot say less.
func WithRetryAfter(d time.Duration) Option {
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	return func(o *options) {
		o.details = append(o.details, retryInfo(secs))
		WithHeader("Retry-After", strconv.FormatInt(secs, 10))(o)
	}
}

// retryInfos keeps the RetryInfo of each delay of up to an hour marshalled
// once (as an Any, which New passes on as it is): every refusal of a rate
// limit names one of a few dozen delays. A longer delay (a daily cap's, a
// monthly quota's: a new one each second) is marshalled each time.
var retryInfos [60*60 + 1]atomic.Pointer[anypb.Any]

// retryInfo is the RetryInfo detail of a delay of secs seconds.
func retryInfo(secs int64) proto.Message {
	cached := secs < int64(len(retryInfos))
	if cached {
		if pb := retryInfos[secs].Load(); pb != nil {
			return pb
		}
	}
	info := &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)}
	if !cached {
		return info
	}
	pb, err := anypb.New(info)
	if err != nil {
		return info // New marshals it again, and drops it if that fails
	}
	retryInfos[secs].Store(pb)
	return pb
}

// New returns an error with the code and message and a single
// google.rpc.ErrorInfo naming the reason (upper snake case, for example
// RATE_LIMIT_EXCEEDED) in the edge's [Domain]. The ErrorInfo is the first
// detail; details from options follow in order.
func New(code connect.Code, reason, message string, opts ...Option) *connect.Error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	err := connect.NewError(code, errors.New(message))
	err.AddDetail(errorInfo(reason, o.meta))
	for _, msg := range o.details {
		// NewErrorDetail fails only for a message that cannot be marshalled;
		// dropping that detail beats failing to answer at all.
		if d, derr := connect.NewErrorDetail(msg); derr == nil {
			err.AddDetail(d)
		}
	}
	for key, values := range o.header {
		for _, v := range values {
			err.Meta().Add(key, v)
		}
	}
	return err
}

// maxCachedInfos bounds the marshalled ErrorInfos errorInfo keeps: the
// edge's refusals name a few reasons, plans and limits; when full the cache
// is emptied and fills again.
const maxCachedInfos = 1024

// infoCache keeps each ErrorInfo marshalled once (as an Any, deterministic:
// metadata in key order), by its reason and metadata: a refused subject's
// every refusal has the same one.
var infoCache = struct {
	mu sync.RWMutex
	m  map[string]*anypb.Any
}{m: map[string]*anypb.Any{}}

// errorInfo is the detail of the ErrorInfo of reason and meta in [Domain].
// The Any it carries is shared between errors: nothing changes it.
func errorInfo(reason string, meta map[string]string) *connect.ErrorDetail {
	var b strings.Builder
	b.WriteString(reason)
	var sorted [8]string
	keys := sorted[:0]
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(meta[k])
	}
	key := b.String()
	infoCache.mu.RLock()
	pb, ok := infoCache.m[key]
	infoCache.mu.RUnlock()
	if !ok {
		pb = new(anypb.Any)
		info := &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: meta}
		// Fails only for invalid UTF-8 in a string: the detail goes out
		// without its fields rather than not at all.
		_ = anypb.MarshalFrom(pb, info, proto.MarshalOptions{Deterministic: true})
		infoCache.mu.Lock()
		if len(infoCache.m) >= maxCachedInfos {
			clear(infoCache.m)
		}
		infoCache.m[key] = pb
		infoCache.mu.Unlock()
	}
	d, _ := connect.NewErrorDetail(pb) // an Any: never fails
	return d
}
