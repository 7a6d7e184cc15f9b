package edge

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// upstreamTransport times and traces every call the proxy forwards, from
// sending it to the backend's last byte, and carries the trace context to
// the backend: its spans become children of the edge.upstream span.
type upstreamTransport struct {
	next    http.RoundTripper
	tracing tracing
	metrics *Metrics
}

func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	call := inflightOf(req).call
	ctx, span := t.tracing.startClient(req.Context())
	if span.IsRecording() {
		span.SetAttributes(attrRPCSystem.String(rpcSystem(call.Protocol)), attrRPCService.String(call.Service),
			attrRPCMethod.String(call.Method), attrServerAddress.String(req.URL.Host))
		// A RoundTripper must not change its request: send a copy that
		// carries this span's context instead of the client's.
		out := req.WithContext(ctx)
		out.Header = req.Header.Clone()
		t.tracing.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
		req = out
	}
	res, err := t.next.RoundTrip(req)
	if err != nil {
		d := time.Since(start)
		inflightOf(req).rec.upstream.Add(int64(d))
		t.metrics.forwarded(call, d)
		if span.IsRecording() {
			span.SetStatus(codes.Error, "backend unreachable")
			span.RecordError(err)
		}
		span.End()
		return nil, err
	}
	inflightOf(req).rec.answered.Store(true)
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
	f, d := inflightOf(b.res.Request), time.Since(b.start)
	f.rec.upstream.Add(int64(d))
	if !whole && b.res.Request.Context().Err() != nil {
		f.rec.cut.Store(true)
	}
	b.t.metrics.forwarded(f.call, d)
	if span := b.span; span.IsRecording() {
		span.SetAttributes(attrHTTPStatus.Int(b.res.StatusCode))
		// gRPC's status is in the trailers, which are read by now, or in
		// the headers of a trailers-only answer.
		status := b.res.Trailer.Get("Grpc-Status")
		if status == "" {
			status = b.res.Header.Get("Grpc-Status")
		}
		if n, err := strconv.Atoi(status); err == nil {
			span.SetAttributes(attrGRPCStatus.Int(n))
			if serverFault(grpcCodeName(n)) {
				span.SetStatus(codes.Error, grpcCodeName(n))
			}
		}
		switch {
		case b.res.StatusCode >= 500:
			span.SetStatus(codes.Error, http.StatusText(b.res.StatusCode))
		case !whole && b.res.Request.Context().Err() != nil:
			span.SetStatus(codes.Error, "answer cut short")
		}
	}
	b.span.End()
}
