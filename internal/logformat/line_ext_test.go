package logformat_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/logformat"
)

// lineAndSlog writes the same line through Line and through the slog
// handler underneath, at the same time, and returns both.
func lineAndSlog(t testing.TB, format string, at time.Time, level slog.Level, msg string, s string, i int64, x float64) (line, want string) {
	t.Helper()
	var got, exp bytes.Buffer
	log, err := logformat.New(&got, format, slog.LevelDebug)
	if err != nil {
		t.Fatal(err)
	}
	h := log.Handler().(*logformat.Handler)
	l := h.Line(context.Background(), at, level, msg)
	l.String("procedure", s)
	l.Int("http_status", i)
	l.Float("duration_ms", x)
	l.String("request_id", s+"\x00"+s)
	l.String(s, "k")
	if err := l.End(); err != nil {
		t.Fatal(err)
	}
	slogLog, _ := logformat.New(&exp, format, slog.LevelDebug)
	r := slog.NewRecord(at, level, msg, 0)
	r.AddAttrs(slog.String("procedure", s), slog.Int64("http_status", i), slog.Float64("duration_ms", x),
		slog.String("request_id", s+"\x00"+s), slog.String(s, "k"))
	if err := slogLog.Handler().(*logformat.Handler).Handler.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return got.String(), exp.String()
}

var lineStrings = []string{
	"", "ok", "/svc.v1.OrganizationService/GetOrganization", "has space", "a=b", `quote"d`, `back\slash`,
	"tab\there", "new\nline", "cr\r", "\x01\x1f\x7f", "caf\u00e9", "nbsp\u00a0", "\u2028\u2029", "emoji \U0001F600",
	"bad \xff\xfe utf8", "\u200b zero width", strings.Repeat("x", 700), "<script>&amp;",
}

var lineFloats = []float64{0, 0.001, 1.234, 12.5, 999.999, 1e6, 1234567.891, 1e20, 1e21, 1.5e22, 1e-6, 9e-7, 1e-12, -3.25}

// The access line is written by Line, not slog: each of its lines is
// byte for byte what slog's handler of the same format writes of the same
// attributes, hostile strings (quotes, control bytes, invalid UTF-8,
// separators) and every shape of float included.
func TestLineIsWhatSlogWrites(t *testing.T) {
	at := time.Date(2026, 11, 28, 5, 25, 12, 345_678_901, time.UTC)
	for _, format := range []string{"json", "text"} {
		for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelError + 2} {
			for i, s := range lineStrings {
				x := lineFloats[i%len(lineFloats)]
				got, want := lineAndSlog(t, format, at.Add(time.Duration(i)*time.Millisecond), level, "call", s, int64(i*-7919), x)
				if got != want {
					t.Errorf("%s %v %q:\nLine: %s\nslog: %s", format, level, s, got, want)
				}
			}
			for _, x := range lineFloats {
				if got, want := lineAndSlog(t, format, at, level, "msg with space", "ok", math.MaxInt64, x); got != want {
					t.Errorf("%s %v %v:\nLine: %s\nslog: %s", format, level, x, got, want)
				}
			}
		}
	}
	local := time.Date(2026, 11, 28, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, format := range []string{"json", "text"} {
		if got, want := lineAndSlog(t, format, local, slog.LevelInfo, "call", "ok", 200, 1.5); got != want {
			t.Errorf("%s in a zone:\nLine: %s\nslog: %s", format, got, want)
		}
	}
}

func FuzzLineIsWhatSlogWrites(f *testing.F) {
	for i, s := range lineStrings {
		f.Add(s, int64(i), lineFloats[i%len(lineFloats)], int64(i)*1_000_003)
	}
	f.Fuzz(func(t *testing.T, s string, i int64, x float64, ns int64) {
		at := time.Unix(0, ns).UTC()
		if math.IsNaN(x) || math.IsInf(x, 0) || at.Year() < 0 || at.Year() > 9999 {
			// Outside what Line takes (finite floats) or what slog writes
			// as a time (it writes an error for a year past 0-9999): not a
			// case, so nothing to compare; no skip to count.
			return
		}
		for _, format := range []string{"json", "text"} {
			if got, want := lineAndSlog(t, format, at, slog.LevelInfo, "call", s, i, x); got != want {
				t.Errorf("%s:\nLine: %s\nslog: %s", format, got, want)
			}
		}
	})
}

// Every byte value, at every place of strings of 1 to 17 bytes (the text
// format reads words of 8 bytes, then the bytes left over), is quoted or not
// exactly as slog quotes it.
func TestEveryByteAnywhereIsQuotedAsSlogQuotesIt(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for n := 1; n <= 17; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				if got, want := lineAndSlog(t, "text", at, slog.LevelInfo, "call", string(b), 1, 1); got != want {
					t.Fatalf("byte %#x at %d of %d:\nLine: %s\nslog: %s", c, pos, n, got, want)
				}
			}
		}
	}
}

// Line writes nothing below the logger's level.
func TestLineBelowTheLevelIsNotWritten(t *testing.T) {
	var out bytes.Buffer
	log, err := logformat.New(&out, "json", slog.LevelWarn)
	if err != nil {
		t.Fatal(err)
	}
	if l := log.Handler().(*logformat.Handler).Line(context.Background(), time.Now(), slog.LevelInfo, "call"); l != nil {
		t.Errorf("an INFO line started at level WARN")
	}
	log.Info("call")
	if out.Len() != 0 {
		t.Errorf("wrote %q", out.String())
	}
}

// Lines written by Line and by slog at once, from many goroutines, onto a
// writer that is not safe for concurrent use, each come out whole (and
// -race sees no race on the writer).
func TestLinesAndSlogLinesDoNotInterleave(t *testing.T) {
	var out bytes.Buffer
	log, err := logformat.New(&out, "text", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	h := log.Handler().(*logformat.Handler)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if g%2 == 0 {
					l := h.Line(context.Background(), time.Now(), slog.LevelInfo, "call")
					l.Int("i", int64(i))
					l.String("end", "here")
					if err := l.End(); err != nil {
						t.Error(err)
					}
				} else {
					log.Info("other", "i", i, "end", "here")
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "time=") || !strings.HasSuffix(line, " end=here") || strings.Count(line, "time=") != 1 {
			t.Fatalf("torn line %q", line)
		}
	}
}

// A duration in milliseconds to the microsecond (float64(µs)/1000, what
// the access line's duration_ms and held_ms are) is written as slog writes
// it, in both formats: every value up to 20 ms, the edges of the
// notations (1e6 ms and more is an exponent in text), and values spread
// up to a thousand years.
func TestMillisecondsAreWrittenAsSlogWritesThem(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var us []int64
	for n := int64(0); n <= 20_000; n++ {
		us = append(us, n)
	}
	for _, edge := range []int64{999_999_999, 1_000_000_000, 1_000_000_001, 1<<43 - 1, 1 << 43, 1<<53 - 1, 1 << 53, 1<<53 + 1} {
		us = append(us, edge-1000, edge-1, edge, edge+1, edge+1000)
	}
	for x, i := uint64(1), 0; i < 20_000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		us = append(us, int64(x>>(1+x%40))%(1000*365*24*3600*1_000_000))
	}
	for _, format := range []string{"json", "text"} {
		for _, n := range us {
			x := float64(n) / 1000
			if got, want := lineAndSlog(t, format, at, slog.LevelInfo, "call", "ok", 200, x); got != want {
				t.Fatalf("%s %d µs:\nLine: %s\nslog: %s", format, n, got, want)
			}
		}
	}
}
