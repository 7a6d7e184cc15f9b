// Package forward is the chain's last step: it sends an admitted call to
// the backend through edge/proxy and supplies the proxy's hooks, which read
// the call's state (edge/call): the limit step's look at the answer
// (environment quotas, ended environments), a Connect JSON error reshaped
// as the specification says, a stream ended at its token's expiry or at the
// edge's shutdown, a stream
// whose client stopped reading, and the answer to a call the backend did
// not answer.
//
// It also times and traces the backend's part of each call (upstream.go).
// It is not the forwarding itself (edge/proxy: the pool, the legs, header
// hygiene).
package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/wire"
)

// Options are what the step is made of; every field is required.
type Options struct {
	Upstream  *url.URL          // http://host:port; the transport picks the backend
	Transport http.RoundTripper // the pool (edge/proxy)
	// Tracing starts each call's edge.upstream span; Metrics (optional)
	// counts the backend's time.
	Tracing observe.Tracing
	Metrics *observe.Metrics
	Limits  *limits.Step
	Logger  *slog.Logger
	// StreamWriteTimeout bounds each write of a stream to its client
	// (requests.stream_write_timeout).
	StreamWriteTimeout time.Duration
	// Pseudonym names this edge in each forwarded call's Via header
	// (proxy.NewPseudonym).
	Pseudonym string
}

// Step forwards admitted calls.
type Step struct {
	proxy        *proxy.Proxy
	limits       *limits.Step
	log          *slog.Logger
	writeTimeout time.Duration
	// draining ends when the edge shuts down: every open stream ends
	// (EndStreams).
	draining   context.Context
	endStreams context.CancelFunc
	pseudonym  string
}

// New returns the step.
func New(o Options) *Step {
	s := &Step{limits: o.Limits, log: o.Logger, writeTimeout: o.StreamWriteTimeout, pseudonym: o.Pseudonym}
	s.draining, s.endStreams = context.WithCancel(context.Background())
	s.proxy = proxy.New(proxy.Options{
		Upstream:       o.Upstream,
		Transport:      &upstreamTransport{next: o.Transport, tracing: o.Tracing, metrics: o.Metrics},
		Stream:         func(r *http.Request) bool { return call.Of(r).Call.Streaming },
		ModifyResponse: s.modifyResponse,
		ErrorHandler:   s.upstreamError,
		Pseudonym:      o.Pseudonym,
	})
	return s
}

// ServeHTTP forwards r, whose call state (call.With) the chain set.
func (s *Step) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st := call.Of(r); st.Call.Streaming {
		s.serveStream(st.Rec, r)
		return
	}
	s.proxy.ServeHTTP(w, r)
}

// Loop returns the refusal of a call this edge forwarded itself that came
// back to it (its Via names the edge: upstream.url, or upstream.urls,
// leads back to the edge), and logs the misconfiguration; nil for any other
// call. The chain asks before it reads the call's body.
func (s *Step) Loop(r *http.Request) *connect.Error {
	if !proxy.CameBack(r.Header, s.pseudonym) {
		return nil
	}
	s.log.ErrorContext(r.Context(), "forwarding loop: a call this edge forwarded came back to it; upstream.url (or upstream.urls) leads back to the edge",
		"procedure", call.Clip(r.URL.Path))
	return apierror.New(connect.CodeInternal, "FORWARDING_LOOP",
		"the edge received a call it had forwarded itself: its upstream leads back to it")
}

// EndStreams ends every open stream, and every stream answered from now
// on, with unavailable (reason EDGE_SHUTTING_DOWN) in its protocol, after
// its last whole message: the edge is shutting down, and its clients
// reconnect to another replica. Unary calls are left to finish.
func (s *Step) EndStreams() { s.endStreams() }

// errRequestBody ends a call whose body the edge cut, when the backend
// answered anyway: upstreamError answers it.
var errRequestBody = errors.New("request body cut by the edge")

// modifyResponse lets the limit step read the answer, ends a stream at its
// token's expiry or the edge's shutdown, and rewrites a Connect unary error, for JSON callers,
// into the specification's shape. Other protocols get the backend's bytes.
func (s *Step) modifyResponse(res *http.Response) error {
	f := call.Of(res.Request)
	if f.Body.Cut() {
		return errRequestBody // the backend answered a body cut short
	}
	if f.Call.Streaming && res.StatusCode == http.StatusOK {
		endEarly(res, f, s.draining)
	}
	if ids, more, ok := limits.EndedEnvironments(res.Header); ok {
		s.limits.Ended(res.Request.Context(), ids, more)
	}
	if f.Admitted.WatchesAnswer() {
		// The answer is read here, whole, once: the call's record (and the
		// idempotency capture, if any) take this reading instead of
		// reading the answer again as it goes out.
		body, err := limits.ReadAnswer(res)
		var read wire.Reading
		if err == nil {
			read = wire.OfResponse(f.Call, res, body)
			f.Rec.Read(read)
		}
		s.limits.Answered(res.Request.Context(), f.Admitted, f.Call, res, body, read, err)
	}
	if !f.Call.UnaryConnect || res.StatusCode == http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, call.MaxErrorBody+1))
	if err != nil {
		return err
	}
	if len(body) > call.MaxErrorBody {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
		return nil
	}
	_ = res.Body.Close()
	if f.Call.JSON {
		if out, ok := apierror.ShapeJSON(body); ok {
			body = out
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// upstreamError answers a call the backend did not answer, and takes one
// that no backend received out of its subject's usage.
func (s *Step) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	f := call.Of(r)
	switch {
	case f.Body.Refusal(err) != nil:
		call.Refuse(w, r, f.Body.Refusal(err))
	case errors.Is(r.Context().Err(), context.DeadlineExceeded):
		call.Refuse(w, r, apierror.New(connect.CodeDeadlineExceeded, "DEADLINE_EXCEEDED", "the backend did not answer in time"))
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client left; nobody reads an answer. Counted as canceled
		// (call.Recorder.Result).
	default:
		s.log.WarnContext(r.Context(), "upstream unavailable", "procedure", f.Call.Procedure, "err", err)
		if proxy.NotSent(err) {
			// No backend received the call: it is not charged
			// (docs/limits.md, "Calls no backend received").
			s.limits.Undelivered(r.Context(), f.Admitted)
		}
		call.Refuse(w, r, apierror.New(connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "the backend is unavailable; retry later"))
	}
}
