package call

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// MaxErrorBody bounds the error bodies the edge reads: the ones it keeps to
// read their code, and the backend's it rewrites.
const MaxErrorBody = 64 << 10

// Recorder is the client's writer, remembering what the edge answered for
// the call's result, metrics, span and access line.
type Recorder struct {
	http.ResponseWriter
	status int
	// id backs the call's X-Request-Id, on the request and on the answer
	// (Name).
	id [1]string
	// ended is the edge's own answer to the call, or how it ended a
	// stream it had begun (End); own: the edge answers the call itself
	// (AnswersItself), so its answer is the edge's, not the backend's.
	ended *connect.Error
	own   bool
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
	// read is the answer's reading when a step read it whole and handed
	// it over (Read); elsewhere: a step above this writer reads it
	// (ReadElsewhere), so this one follows nothing.
	read      wire.Reading
	hasRead   bool
	elsewhere bool
	// What wire.Of reads the answer's code from: the body's envelopes
	// (gRPC-Web, Connect streams), an error body, the bytes written.
	frames  *wire.Frames
	errBody []byte
	errOver bool
	written int64
	// clientDeadline: the client chose a deadline shorter than the edge's
	// cap (requests.max_*_timeout), so deadline_exceeded is its choice.
	clientDeadline bool
	// streaming: the call is a stream, whose deadline is its lifetime.
	streaming bool
	// sent: the call left for the backend with time left, so a deadline
	// that ran out afterwards ran out while the backend held it.
	sent atomic.Bool
	// held is how long the edge held the call before deciding it (a
	// client that ignored Retry-After: edge/early).
	held time.Duration
}

// NewRecorder records what goes out to w for call c.
func NewRecorder(w http.ResponseWriter, c wire.Call) *Recorder {
	return &Recorder{ResponseWriter: w, frames: wire.NewFrames(c), streaming: c.Streaming}
}

// Name gives the call its request id (RequestID): X-Request-Id on the
// request, toward the backend, and on the answer, one value that both
// headers share, held by the Recorder (no allocation of its own). With no
// room to grow, an append to either header copies it.
func (r *Recorder) Name(req *http.Request, id string) {
	r.id[0] = id
	req.Header["X-Request-Id"] = r.id[:1:1]
	r.ResponseWriter.Header()["X-Request-Id"] = r.id[:1:1]
}

// Status is the HTTP status that went out (0: none yet).
func (r *Recorder) Status() int { return r.status }

// End records that the edge answered the call with err, or ended with err
// a stream it had begun (at its token's expiry, or when its client stopped
// reading). It records, and writes nothing: call.Refuse writes the edge's
// refusals; a step that ends a stream writes the end in the stream's own
// protocol. Result decides the call's code from it.
func (r *Recorder) End(err *connect.Error) {
	r.ended = err
	if err.Code() == connect.CodeUnavailable {
		r.reason = unavailableReasonOf(err)
	}
}

// Read hands the Recorder a step's reading of the whole answer (the forward
// step's of an answer the limits watch, the idempotency capture's): the
// answer is read once per call, and Result takes this reading. The
// Recorder stops following the answer itself.
func (r *Recorder) Read(read wire.Reading) {
	r.read, r.hasRead = read, true
	r.ReadElsewhere()
}

// Reading is the reading a step handed over (Read), if any.
func (r *Recorder) Reading() (wire.Reading, bool) { return r.read, r.hasRead }

// ReadElsewhere says that a step above this writer reads the answer whole
// and will hand its reading over (Read): the Recorder follows nothing of
// it. Should the step end without handing one (its handler panicked: an
// answer cut short), the call's code is unknown.
func (r *Recorder) ReadElsewhere() {
	r.elsewhere, r.frames, r.errBody, r.errOver = true, nil, nil, false
}

// AnswersItself records that the edge answers the call itself, in place of
// the backend (GetUsage, gRPC health, reflection): its outcome is answered
// whatever its code, unless the code says it could not serve the call.
func (r *Recorder) AnswersItself() { r.own = true }

// SetUnavailableReason names the dependency behind an unavailable answer
// that a step wrote itself.
func (r *Recorder) SetUnavailableReason(reason string) { r.reason = reason }

// SetReplayedCode is how the idempotency step tells the code of the answer
// it replays.
func (r *Recorder) SetReplayedCode(code string) { r.replayCode = code }

// AddHeld notes that the edge held the call for d before deciding it.
func (r *Recorder) AddHeld(d time.Duration) { r.held += d }

// Held is how long the edge held the call before deciding it.
func (r *Recorder) Held() time.Duration { return r.held }

// SetClientDeadline records that the client chose a deadline shorter than
// the edge's cap.
func (r *Recorder) SetClientDeadline(yes bool) { r.clientDeadline = yes }

// Answered records that the backend answered the call.
func (r *Recorder) Answered() { r.answered.Store(true) }

// AddUpstream adds d to the time the backend took.
func (r *Recorder) AddUpstream(d time.Duration) { r.upstream.Add(int64(d)) }

// Upstream is the time the backend took.
func (r *Recorder) Upstream() time.Duration { return time.Duration(r.upstream.Load()) }

// CutShort records that the backend's answer was cut short because the
// client left.
func (r *Recorder) CutShort() { r.cut.Store(true) }

// WasCut reports whether the backend's answer was cut short.
func (r *Recorder) WasCut() bool { return r.cut.Load() }

// Outcome classifies the call for the duration histogram; code is its
// result code.
func (r *Recorder) Outcome(code string) string {
	switch {
	case code == "canceled":
		return OutcomeError
	case r.replayCode != "":
		return OutcomeReplayed
	case r.answered.Load():
		return OutcomeForwarded
	case r.ended == nil && !r.own || noAnswer(code):
		return OutcomeError
	case r.own:
		return OutcomeAnswered
	}
	return OutcomeRefused
}

// noAnswer reports the codes of the edge's own answers that mean it could
// not serve the call, rather than refused it: the server faults but
// unimplemented (an unknown procedure is the caller's to fix).
func noAnswer(code string) bool { return code != "unimplemented" && ServerFault(code) }

// UnavailableReason names the dependency behind an unavailable result.
func (r *Recorder) UnavailableReason() string {
	if r.reason == "" {
		return UnavailableUpstream // the backend's own answer
	}
	return r.reason
}

// Sent records that the call left for the backend with time left.
func (r *Recorder) Sent() { r.sent.Store(true) }

// DeadlineOrigin says where a deadline_exceeded result's deadline ran out:
// in the backend (the service's failure, whoever chose the deadline), or
// before the call reached it (the client's choice if it chose the deadline).
// A stream's deadline is how long its client chose to watch, not how long
// the backend may take: when the client chose it, it is the client's.
func (r *Recorder) DeadlineOrigin() string {
	if r.streaming && r.clientDeadline {
		return DeadlineByClient
	}
	if r.sent.Load() {
		return DeadlineInBackend
	}
	if r.clientDeadline {
		return DeadlineByClient
	}
	return DeadlineByEdge
}

func (r *Recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.written += int64(n)
	if r.frames != nil {
		r.frames.Feed(b[:n])
	} else if r.status != http.StatusOK && !r.errOver && !r.elsewhere {
		// A Connect unary or HTTP/JSON error: its code is in the body.
		if len(r.errBody)+n > MaxErrorBody {
			r.errBody, r.errOver = nil, true
		} else {
			r.errBody = append(r.errBody, b[:n]...)
		}
	}
	return n, err
}

// Flush and Unwrap let the proxy flush every message and http.ResponseController
// reach the connection. A flush before any status sends 200 (net/http
// does): connect-go's gRPC and gRPC-Web handlers send a trailers-only error
// so, without WriteHeader.
func (r *Recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Result is the one place that decides the code a call is counted, traced
// and logged under, as a Connect/gRPC code name. clientGone: the client
// left before the call was over (its request's context ended).
//
// A client that left before its answer was complete gets canceled: not the
// service's failure, and not a success either. Else the code is the edge's
// own answer (End), else the code of a replayed answer, else what
// wire.Of reads from the answer that went out.
func (r *Recorder) Result(c wire.Call, clientGone bool) string {
	code := r.answerCode(c)
	if clientGone && (r.status == 0 || r.WasCut() || ServerFault(code)) {
		return "canceled"
	}
	return code
}

func (r *Recorder) answerCode(c wire.Call) string {
	if r.ended != nil {
		return r.ended.Code().String()
	}
	if r.replayCode != "" {
		return r.replayCode
	}
	code, ending := r.read.Code, r.read.Ending
	switch {
	case r.hasRead:
	case r.elsewhere:
		ending = wire.CutShort
	default:
		code, ending = r.readWhatWentOut(c)
	}
	switch ending {
	case wire.Whole:
		return wire.CodeName(code)
	case wire.Unknowable:
		return wire.CodeName(wire.HTTPCode(r.status))
	}
	return "unknown" // cut short: no status reached the client
}

// readWhatWentOut reads the call's code from the answer as it went out.
func (r *Recorder) readWhatWentOut(c wire.Call) (connect.Code, wire.Ending) {
	h := r.Header()
	return wire.Of(c, wire.Answer{Status: r.status, Header: h, Trailer: h, Frames: r.frames,
		Body: r.errBody, BodyOver: r.errOver, Written: r.written})
}

// ServerFault reports whether a code says the server failed, rather than
// the caller: a call with such a code whose client left is canceled, and
// its span gets the error status (OpenTelemetry's RPC server conventions).
func ServerFault(code string) bool {
	switch code {
	case "unknown", "deadline_exceeded", "unimplemented", "internal", "unavailable", "data_loss":
		return true
	}
	return false
}

// unavailableReasonOf names the dependency behind one of the edge's own
// unavailable answers, from its ErrorInfo reason.
func unavailableReasonOf(err *connect.Error) string {
	for _, d := range err.Details() {
		v, _ := d.Value()
		if ei, ok := v.(*errdetails.ErrorInfo); ok {
			switch {
			case ei.Reason == limits.ReasonUnavailable:
				return UnavailableLimits
			case ei.Reason == identity.ReasonIssuerUnavailable:
				return UnavailableIssuer
			case ei.Reason == ReasonOverloaded:
				return UnavailableOverload
			case ei.Reason == ReasonShuttingDown:
				return UnavailableShutdown
			case strings.HasPrefix(ei.Reason, "IDEMPOTENCY"):
				return UnavailableIdempotency
			}
		}
	}
	return UnavailableUpstream
}

// Refuse writes the edge's own error in the caller's protocol, and records
// it as the call's result.
func Refuse(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	rec, ok := w.(*Recorder)
	if !ok { // behind another step's writer, e.g. idempotency's capture
		rec = Of(r).Rec
	}
	rec.End(err)
	apierror.Write(w, r, err)
}
