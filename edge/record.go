package edge

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/result"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// recorder remembers what the edge answered, for the access log and metrics.
type recorder struct {
	http.ResponseWriter
	status int
	code   string // set when the edge itself refused the call
	// replayCode is the code a replayed answer was stored with (see
	// SetReplayedCode); the HTTP status alone cannot tell e.g.
	// failed_precondition from invalid_argument.
	replayCode string
	// answered: the backend answered (the call was forwarded); upstream is
	// the time the backend took, in nanoseconds; cut: its answer was cut
	// short because the client left. Set from the proxy's transport.
	answered atomic.Bool
	cut      atomic.Bool
	upstream atomic.Int64
	// reason says which dependency an unavailable answer is about.
	reason string
	// What result.Of reads the answer's code from: the body's envelopes
	// (gRPC-Web, Connect streams), an error body, the bytes written.
	frames  *wire.Frames
	errBody []byte
	errOver bool
	written int64
	// clientDeadline: the client chose a deadline shorter than the edge's
	// cap (requests.max_*_timeout), so deadline_exceeded is its choice.
	clientDeadline bool
}

// SetReplayedCode is how the idempotency step tells the code of the answer
// it replays.
func (r *recorder) SetReplayedCode(code string) { r.replayCode = code }

// outcome classifies the call for the duration histogram; code is its
// result code.
func (r *recorder) outcome(code string) string {
	switch {
	case code == "canceled":
		return observe.OutcomeError
	case r.replayCode != "":
		return observe.OutcomeReplayed
	case r.answered.Load():
		return observe.OutcomeForwarded
	case r.code == "" || noAnswer[code]:
		return observe.OutcomeError
	}
	return observe.OutcomeRefused
}

// noAnswer are the codes of the edge's own answers that mean it could not
// serve the call, rather than refused it.
var noAnswer = map[string]bool{"unavailable": true, "deadline_exceeded": true, "internal": true, "unknown": true, "data_loss": true}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.written += int64(n)
	if r.frames != nil {
		r.frames.Feed(b[:n])
	} else if r.status != http.StatusOK && !r.errOver {
		// A Connect unary or HTTP/JSON error: its code is in the body.
		if len(r.errBody)+n > maxErrorBody {
			r.errBody, r.errOver = nil, true
		} else {
			r.errBody = append(r.errBody, b[:n]...)
		}
	}
	return n, err
}

// Flush and Unwrap let the proxy flush every message and http.ResponseController
// reach the connection.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// resultCode is the call's outcome as a Connect/gRPC code name: the edge's
// own refusal, else the code of a replayed answer, else what call.Result
// reads from the answer that went out.
func (r *recorder) resultCode(c classify.Call) string {
	if r.code != "" {
		return r.code
	}
	if r.replayCode != "" {
		return r.replayCode
	}
	h := r.Header()
	code, ending := result.Of(c, result.Answer{Status: r.status, Header: h, Trailer: h, Frames: r.frames,
		Body: r.errBody, BodyOver: r.errOver, Written: r.written})
	switch ending {
	case result.Whole:
		return result.CodeName(code)
	case result.Unknowable:
		return result.CodeName(result.HTTPCode(r.status))
	}
	return "unknown" // cut short: no status reached the client
}

// logCall writes the one access line of a call. It never names the token,
// and names the subject only by a hash. While the call's span records, the
// line carries its trace_id, to find the trace from the log and back.
func (s *Server) logCall(r *http.Request, c classify.Call, p *identity.Principal, rec *recorder, code string, d time.Duration) {
	if code == "ok" && s.cfg.Log.SampleOK < 1 && rand.Float64() >= s.cfg.Log.SampleOK {
		return // log.sample_ok: only a share of successful calls is logged
	}
	attrs := []slog.Attr{
		slog.String("procedure", c.Procedure),
		slog.String("protocol", string(c.Protocol)),
		slog.String("code", code),
		slog.String("outcome", rec.outcome(code)),
		slog.Int("http_status", rec.status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("request_id", r.Header.Get("X-Request-Id")),
	}
	if c.Procedure == "" {
		attrs[0] = slog.String("path", clip(r.URL.Path))
	}
	if p != nil {
		attrs = append(attrs, slog.String("subject", p.Hash()), slog.String("plan", p.Plan))
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		attrs = append(attrs, slog.String("trace_id", span.SpanContext().TraceID().String()))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "call", attrs...)
}
