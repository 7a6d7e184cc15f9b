package observe

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// AccessLog writes the one access line of each call.
type AccessLog struct {
	Log *slog.Logger
	// SampleOK is the share of successful calls logged (log.sample_ok);
	// every other call is logged.
	SampleOK float64
	// Metrics bound the lines of canceled calls (log.canceled_per_second)
	// and count those left out; nil: every line is written.
	Metrics *Metrics
}

// Write writes the access line of a call whose result is code and outcome
// (call.Recorder's Result and Outcome, read once by the chain). It never
// names the token, and names the subject only by a hash. While the call's
// span records, the line carries its trace_id, to find the trace from the
// log and back.
func (a AccessLog) Write(r *http.Request, c wire.Call, p *identity.Principal, rec *call.Recorder, code, outcome string, d time.Duration) {
	if code == "ok" && a.SampleOK < 1 && rand.Float64() >= a.SampleOK {
		return
	}
	if !a.Metrics.KeepLine(code) {
		return // log.canceled_per_second
	}
	// Room for every attribute a line may have (held_ms, subject, plan,
	// trace_id too), on the stack: growing it was an allocation per line.
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs,
		slog.String("procedure", c.Procedure),
		slog.String("protocol", string(c.Protocol)),
		slog.String("code", code),
		slog.String("outcome", outcome),
		slog.Int("http_status", rec.Status()),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("request_id", r.Header.Get("X-Request-Id")),
	)
	if c.Procedure == "" {
		attrs[0] = slog.String("path", call.Clip(r.URL.Path))
	}
	if held := rec.Held(); held > 0 {
		// Part of duration_ms: the wait of a client that ignored Retry-After.
		attrs = append(attrs, slog.Float64("held_ms", float64(held.Microseconds())/1000))
	}
	if p != nil {
		attrs = append(attrs, slog.String("subject", p.Hash()), slog.String("plan", p.Plan))
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		attrs = append(attrs, slog.String("trace_id", span.SpanContext().TraceID().String()))
	}
	a.Log.LogAttrs(r.Context(), slog.LevelInfo, "call", attrs...)
}
