package limits_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/internal/testenv"
)

// TestSubjectTablesHoldTheirBounds fills the shadow log's pacing and the
// late confirmations past their bounds: each keeps its bound, and the
// metrics (CacheStats) count what was turned away.
func TestSubjectTablesHoldTheirBounds(t *testing.T) {
	const more = 5
	step := limits.New(policy.NewLive(&config.Config{}), limits.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i := range limits.MaxShadowLogged + more {
		if !step.NoteShadowLogged(fmt.Sprint("subject-", i), "plan") {
			t.Fatalf("pair %d taken for logged before", i)
		}
	}
	for i := range limits.MaxLateConfirms + more {
		step.KeepLateConfirm(fmt.Sprint("subject-", i), fmt.Sprint("env-", i))
	}
	s := testenv.CacheStats(step)
	if got, want := s["shadow_log"], (testenv.CacheStat{Entries: limits.MaxShadowLogged, Bound: limits.MaxShadowLogged, Evictions: more}); got != want {
		t.Errorf("shadow log %+v, want %+v", got, want)
	}
	if got, want := s["late_confirm"], (testenv.CacheStat{Entries: limits.MaxLateConfirms, Bound: limits.MaxLateConfirms, Evictions: more}); got != want {
		t.Errorf("late confirmations %+v, want %+v", got, want)
	}
}
