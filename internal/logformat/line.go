package logformat

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Handler is the handler of the loggers New makes: slog's own text or
// JSON handler, and Line, which writes a line of strings and numbers
// without slog's Record, byte for byte as that handler would, for the line
// written on every call (the edge's access line). Through slog that line
// cost about 19,000 instructions of each call (docs/benchmarks.md): a
// Record and its attributes copied, every value resolved and switched on
// by kind, a JSON float through encoding/json.
//
// A logger derived from it (With, WithGroup) has slog's handler only: its
// lines carry attributes or groups that Line does not write.
type Handler struct {
	slog.Handler
	out  *lockedWriter // shared with the slog handler: lines never interleave
	json bool
}

// lockedWriter serialises writes: slog's handler locks its own writes, and
// Line's must not interleave with them.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Line is one log line being written; Handler.Line starts it, End writes
// it. Its methods write attributes in the order called, as slog writes a
// record's attributes.
type Line struct {
	h   *Handler
	buf []byte
}

var linePool = sync.Pool{New: func() any { return &Line{buf: make([]byte, 0, 512)} }}

// Line starts a line of level and msg at t, or returns nil when the
// handler does not write level.
func (h *Handler) Line(ctx context.Context, t time.Time, level slog.Level, msg string) *Line {
	if !h.Enabled(ctx, level) {
		return nil
	}
	l := linePool.Get().(*Line)
	l.h = h
	b := l.buf[:0]
	t = t.Round(0) // as slog: no monotonic reading
	if h.json {
		b = append(b, `{"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":`...)
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t)
		b = append(b, " level="...)
	}
	b = h.appendString(b, level.String())
	b = h.appendKey(b, "msg")
	b = h.appendString(b, msg)
	l.buf = b
	return l
}

// String adds key=value.
func (l *Line) String(key, value string) {
	l.buf = l.h.appendString(l.h.appendKey(l.buf, key), value)
}

// Int adds key=value.
func (l *Line) Int(key string, value int64) {
	l.buf = strconv.AppendInt(l.h.appendKey(l.buf, key), value, 10)
}

// Float adds key=value, written as slog writes a float64: text as %g, JSON
// as encoding/json does. value must be finite (a duration, a ratio).
func (l *Line) Float(key string, value float64) {
	b := l.h.appendKey(l.buf, key)
	if b, ok := appendThousandths(b, value, l.h.json); ok {
		l.buf = b
		return
	}
	if !l.h.json {
		l.buf = strconv.AppendFloat(b, value, 'g', -1, 64)
		return
	}
	// encoding/json's float64: like %g, with ES6's exponent cut-offs and
	// the exponent not padded to two digits.
	format := byte('f')
	if abs := math.Abs(value); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, value, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	l.buf = b
}

// appendThousandths writes value, when it is a whole number of thousandths
// (float64(n)/1000, as a duration in milliseconds to the microsecond is),
// with integer arithmetic: the digits of n, the point before its last
// three, trailing zeros dropped. That is what the float formatting writes:
// below 2^43 thousandths the float's neighbours are far closer than a
// thousandth, so no shorter decimal denotes it. Outside the plain notation
// (text writes 1e+06 and beyond with an exponent), or for any other value,
// ok is false.
func appendThousandths(b []byte, value float64, json bool) (_ []byte, ok bool) {
	limit := 1e9 // text: %g turns to an exponent from 1e6
	if json {
		limit = 1 << 43
	}
	m := math.Round(value * 1000)
	if !(m >= 0 && m < limit) {
		return b, false
	}
	n := int64(m)
	if float64(n)/1000 != value {
		return b, false
	}
	b = strconv.AppendInt(b, n/1000, 10)
	frac := n % 1000
	if frac == 0 {
		return b, true
	}
	digits := [4]byte{'.', byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	end := 4
	for digits[end-1] == '0' {
		end--
	}
	return append(b, digits[:end]...), true
}

// End writes the line and returns it to the pool; the Line must not be
// used after.
func (l *Line) End() error {
	if l.h.json {
		l.buf = append(l.buf, '}')
	}
	l.buf = append(l.buf, '\n')
	_, err := l.h.out.Write(l.buf)
	if cap(l.buf) <= 16<<10 { // keep no outsized buffer
		l.h = nil
		linePool.Put(l)
	}
	return err
}

// appendKey writes the separator and key, as slog's handleState.appendKey
// does outside any group.
func (h *Handler) appendKey(b []byte, key string) []byte {
	if h.json {
		b = append(b, ',')
		b = h.appendString(b, key)
		return append(b, ':')
	}
	b = append(b, ' ')
	b = h.appendString(b, key)
	return append(b, '=')
}

// appendString writes s as slog's handlers write a string: in JSON
// quoted and escaped; in text as it is, or quoted by strconv when it
// needs to be.
func (h *Handler) appendString(b []byte, s string) []byte {
	if h.json {
		b = append(b, '"')
		b = appendEscapedJSONString(b, s)
		return append(b, '"')
	}
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// The functions below are log/slog's own (Go 1.26, BSD licence), which it
// does not export; TestLineIsWhatSlogWrites holds them to slog's output.

// appendRFC3339Millis is slog's text time: RFC 3339 with milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
}

// needsQuoting is slog's text rule: empty, or any byte JSON would escape
// (a backslash aside), a space, '=', or a rune not printable. ASCII is
// decided eight bytes at a time, then a byte at a time without a table
// (most lines are ASCII); from the first byte that is not, slog's own loop
// goes on.
func needsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !plainWord(s[i : i+8]) {
			break
		}
	}
	for ; i < len(s); i++ {
		switch b := s[i]; {
		case b <= ' ' || b == '"' || b == '=':
			return true
		case b >= utf8.RuneSelf:
			return needsQuotingFrom(s, i)
		}
	}
	return false
}

// plainWord reports that none of w's eight bytes is a control byte, a
// space, '"', '=' or over 0x7f: each test is exact for "any byte" (a false
// hit can only follow a true one, in a higher byte).
func plainWord(w string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	below := (x - ones*0x21) &^ x // a byte under 0x21: a control byte or a space
	quote := x ^ (ones * '"')
	equals := x ^ (ones * '=')
	return (below|(quote-ones)&^quote|(equals-ones)&^equals|x)&highs == 0
}

func needsQuotingFrom(s string, i int) bool {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if b != '\\' && (b == ' ' || b == '=' || !safeSet[b]) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendEscapedJSONString escapes s for a JSON string, without HTML
// escaping, as slog's JSON handler does.
func appendEscapedJSONString(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safeSet[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\')
			switch c {
			case '\\', '"':
				b = append(b, c)
			case '\n':
				b = append(b, 'n')
			case '\r':
				b = append(b, 'r')
			case '\t':
				b = append(b, 't')
			default: // the other bytes below 0x20
				b = append(b, 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029, valid in JSON but not in JavaScript.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// safeSet holds the ASCII bytes a JSON string holds as they are: from
// the space to DEL, but '"' and '\\'.
var safeSet = func() (set [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		set[c] = c != '"' && c != '\\'
	}
	return set
}()
