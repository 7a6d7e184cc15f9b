package logformat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/logformat"
)

// lease logs as a group holding a duration, as a configuration does.
type lease struct{ ttl time.Duration }

func (l lease) LogValue() slog.Value {
	return slog.GroupValue(slog.Duration("ttl", l.ttl))
}

func TestDurationsAreGoDurationsInJSONAndText(t *testing.T) {
	var js, text bytes.Buffer
	for format, out := range map[string]*bytes.Buffer{"json": &js, "text": &text} {
		log, err := logformat.New(out, format, slog.LevelInfo)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("x", "grace", 30*time.Second, slog.Group("g", slog.Duration("wait", 1500*time.Microsecond)), "lease", lease{2 * time.Minute})
	}
	var rec struct {
		Grace string            `json:"grace"`
		G     map[string]string `json:"g"`
		Lease map[string]string `json:"lease"`
	}
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec.Grace != "30s" || rec.G["wait"] != "1.5ms" || rec.Lease["ttl"] != "2m0s" {
		t.Errorf("JSON: %s (%v)", js.String(), err)
	}
	for _, want := range []string{"grace=30s", "g.wait=1.5ms", "lease.ttl=2m0s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text: %s, want %s", text.String(), want)
		}
	}
	if _, err := logformat.New(&js, "xml", slog.LevelInfo); err == nil {
		t.Error("format xml accepted")
	}
}

// The text handler is made without ReplaceAttr, which it does not need:
// its lines are those it wrote with it, byte for byte.
func TestTextLinesAreThoseOfATextHandlerWithReplaceAttr(t *testing.T) {
	var got, want bytes.Buffer
	log, err := logformat.New(&got, "text", slog.LevelDebug)
	if err != nil {
		t.Fatal(err)
	}
	with := slog.New(slog.NewTextHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: logformat.ReplaceAttr}))
	at := time.Date(2026, 11, 27, 23, 5, 37, 221_000_000, time.UTC)
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn + 2, slog.LevelError} {
		r := slog.NewRecord(at, lv, "a message with spaces", 0)
		r.AddAttrs(
			slog.String("procedure", "/svc.v1.OrganizationService/GetOrganization"), slog.String("empty", ""),
			slog.String("quoted", `say "x"=1`), slog.String("unicode", "µ→ok"), slog.Int("http_status", 200),
			slog.Float64("duration_ms", 14.992), slog.Bool("b", true), slog.Time("at", at),
			slog.Duration("grace", 30*time.Second), slog.Duration("tiny", 1500*time.Nanosecond), slog.Duration("neg", -time.Millisecond),
			slog.Duration("zero", 0), slog.Group("g", slog.Duration("wait", 1500*time.Microsecond), slog.String("k", "v w")),
			slog.Any("lease", lease{2 * time.Minute}), slog.Any("err", io.EOF), slog.Any("nil", nil),
		)
		for _, l := range []*slog.Logger{log, with} {
			l := l.With("edge", "dev", slog.Duration("pre", time.Second)).WithGroup("call")
			if err := l.Handler().Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got.Len() == 0 || got.String() != want.String() {
		t.Errorf("text lines differ:\n got %s\nwant %s", got.String(), want.String())
	}
}
