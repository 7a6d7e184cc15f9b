package limits

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// TestSubjectTablesHoldTheirBounds fills the shadow log's pacing and the
// late confirmations past their bounds.
func TestSubjectTablesHoldTheirBounds(t *testing.T) {
	const more = 5
	l := &Step{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	now := time.Now()
	for i := range maxShadowLogged + more {
		if !l.shadows.first(fmt.Sprint("subject-", i, "\x00plan"), now) {
			t.Fatalf("pair %d taken for logged before", i)
		}
	}
	// Nothing retries here: the retrying loop counts as running.
	l.late.running = true
	for i := range maxLateConfirms + more {
		l.confirmLater(fmt.Sprint("subject-", i), lateConfirm{id: fmt.Sprint("env-", i)})
	}
	s := testenv.CacheStats(l)
	if got, want := s["shadow_log"], (testenv.CacheStat{Entries: maxShadowLogged, Bound: maxShadowLogged, Evictions: more}); got != want {
		t.Errorf("shadow log %+v, want %+v", got, want)
	}
	if got, want := s["late_confirm"], (testenv.CacheStat{Entries: maxLateConfirms, Bound: maxLateConfirms, Evictions: more}); got != want {
		t.Errorf("late confirmations %+v, want %+v", got, want)
	}
}
