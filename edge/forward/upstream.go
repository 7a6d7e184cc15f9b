package forward

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/proxy"
	"go.opentelemetry.io/otel/trace"
)

// upstreamTransport times and traces every call the proxy forwards, from
// sending it to the backend's last byte, and carries the trace context to
// the backend: its spans become children of the edge.upstream span.
type upstreamTransport struct {
	next    http.RoundTripper
	tracing observe.Tracing
	metrics *observe.Metrics
}

// ForwardsHeader says whether the transport it wraps forwards a call's
// header itself (proxy.HeaderForwarder): this one keeps the call's context.
func (t *upstreamTransport) ForwardsHeader() bool {
	hf, ok := t.next.(proxy.HeaderForwarder)
	return ok && hf.ForwardsHeader()
}

func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	st := call.Of(req)
	if deadline, ok := req.Context().Deadline(); !ok || start.Before(deadline) {
		st.Rec.Sent()
	}
	c := st.Call
	ctx, span := t.tracing.StartUpstream(req.Context(), c, req.URL.Host)
	if span.IsRecording() {
		// A RoundTripper must not change its request: send a copy that
		// carries this span's context instead of the client's.
		out := req.WithContext(ctx)
		out.Header = req.Header.Clone()
		t.tracing.Inject(ctx, out.Header)
		req = out
	}
	res, err := t.next.RoundTrip(req)
	if err != nil {
		d := time.Since(start)
		st.Rec.AddUpstream(d)
		t.metrics.Forwarded(c, d)
		observe.UpstreamFailed(span, err)
		span.End()
		return nil, err
	}
	st.Rec.Answered()
	res.Body = &upstreamBody{ReadCloser: res.Body, t: t, res: res, span: span, start: start}
	return res, nil
}

// upstreamBody ends the upstream span and timing at the backend's last
// byte (or when the proxy closes the body early).
type upstreamBody struct {
	io.ReadCloser
	t     *upstreamTransport
	res   *http.Response
	span  trace.Span
	start time.Time
	ended atomic.Bool
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end(err == io.EOF)
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	err := b.ReadCloser.Close()
	b.end(false)
	return err
}

func (b *upstreamBody) end(whole bool) {
	if !b.ended.CompareAndSwap(false, true) {
		return
	}
	f, d := call.Of(b.res.Request), time.Since(b.start)
	f.Rec.AddUpstream(d)
	cut := !whole && b.res.Request.Context().Err() != nil
	if cut {
		f.Rec.CutShort()
	}
	b.t.metrics.Forwarded(f.Call, d)
	observe.UpstreamAnswered(b.span, b.res, cut)
	b.span.End()
}
