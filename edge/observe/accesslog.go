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
	"github.com/orgedge/edge/internal/logformat"
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
	if h, ok := a.Log.Handler().(*logformat.Handler); ok {
		// The handler New made: the line written directly, as its slog
		// handler would write it, at a fraction of the cost.
		if l := h.Line(r.Context(), time.Now(), slog.LevelInfo, "call"); l != nil {
			fields(l, r, c, p, rec, code, outcome, d)
			_ = l.End()
		}
		return
	}
	// Room for every attribute a line may have (held_ms, subject, plan,
	// trace_id too).
	attrs := attrList(make([]slog.Attr, 0, 11))
	fields(&attrs, r, c, p, rec, code, outcome, d)
	a.Log.LogAttrs(r.Context(), slog.LevelInfo, "call", attrs...)
}

// fieldWriter is what the access line is written to: a logformat.Line, or
// slog's attributes for any other handler.
type fieldWriter interface {
	String(key, value string)
	Int(key string, value int64)
	Float(key string, value float64)
}

// fields writes the access line's fields, in order.
func fields(f fieldWriter, r *http.Request, c wire.Call, p *identity.Principal, rec *call.Recorder, code, outcome string, d time.Duration) {
	if c.Procedure == "" {
		f.String("path", call.Clip(r.URL.Path))
	} else {
		f.String("procedure", c.Procedure)
	}
	f.String("protocol", string(c.Protocol))
	f.String("code", code)
	f.String("outcome", outcome)
	f.Int("http_status", int64(rec.Status()))
	f.Float("duration_ms", float64(d.Microseconds())/1000)
	f.String("request_id", wire.FirstValue(r.Header["X-Request-Id"]))
	if held := rec.Held(); held > 0 {
		// Part of duration_ms: the wait of a client that ignored Retry-After.
		f.Float("held_ms", float64(held.Microseconds())/1000)
	}
	if p != nil {
		f.String("subject", p.Hash())
		f.String("plan", p.Plan)
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		f.String("trace_id", span.SpanContext().TraceID().String())
	}
}

type attrList []slog.Attr

func (l *attrList) String(key, value string)        { *l = append(*l, slog.String(key, value)) }
func (l *attrList) Int(key string, value int64)     { *l = append(*l, slog.Int64(key, value)) }
func (l *attrList) Float(key string, value float64) { *l = append(*l, slog.Float64(key, value)) }
