// Package logformat makes the log/slog handlers of the edge and the backend,
// so that both write a value of a kind the same way in JSON and in text: a
// duration as Go writes it ("30s", "1.5ms"), as the configuration and its
// printed form do, never as the integer nanoseconds slog's JSON handler
// writes by itself ("grace":30000000000 read as 30 billion of something).
//
// It is not the access log's shape (edge/observe writes its fields, e.g.
// duration_ms, a number whose unit its name says) nor a log pipeline: lines
// go to the writer given.
package logformat

import (
	"fmt"
	"io"
	"log/slog"
)

// New returns a logger writing format ("json" or "text") to w at level
// and above. Its handler is a *Handler: slog's, and Line for the line
// written on every call.
func New(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	out := &lockedWriter{w: w}
	switch format {
	case "json":
		return slog.New(&Handler{Handler: slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: ReplaceAttr}), out: out, json: true}), nil
	case "text":
		// The text handler writes a duration as its String already, and a
		// ReplaceAttr, even one that changes nothing, takes it off its fast
		// path for every attribute of every line (the level through
		// MarshalText, each value resolved twice): in the development
		// mode, which logs every call, that was about 7,000 instructions of
		// each access line (docs/benchmarks.md).
		return slog.New(&Handler{Handler: slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}), out: out}), nil
	}
	return nil, fmt.Errorf("log format must be json or text, not %q", format)
}

// ReplaceAttr writes a time.Duration as its String ("30s"), for the JSON
// handler, which would write nanoseconds; the text handler does so already. The
// handlers call it for every attribute, inside groups and after resolving
// a LogValuer, so no call site has to remember it.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
