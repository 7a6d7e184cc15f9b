package logformat_test

import (
	"bytes"
	"encoding/json"
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
