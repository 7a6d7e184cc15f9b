package observe_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/observe"
)

// Each round trip is timed under its own op, the script and the pipeline
// (whose series are looked up once) as every other command, and an op is
// listed only once it has been sent.
func TestEachRoundTripIsTimedUnderItsOp(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := observe.NewRedisHook(reg, "")
	ctx := context.Background()
	ok := func(context.Context, redis.Cmder) error { return nil }
	okPipeline := func(context.Context, []redis.Cmder) error { return nil }
	one, many := h.ProcessHook(ok), h.ProcessPipelineHook(okPipeline)
	for _, op := range []string{"evalsha", "pipeline", "get"} {
		if _, listed := histogramCount(t, reg, op); listed {
			t.Fatalf("op %s listed before any round trip", op)
		}
	}
	for range 3 {
		_ = one(ctx, redis.NewCmd(ctx, "evalsha", "abc", 0))
	}
	for range 2 {
		_ = many(ctx, []redis.Cmder{redis.NewCmd(ctx, "evalsha", "abc", 0), redis.NewCmd(ctx, "evalsha", "abc", 0)})
	}
	_ = one(ctx, redis.NewCmd(ctx, "get", "k"))
	for op, want := range map[string]float64{"evalsha": 3, "pipeline": 2, "get": 1} {
		if got, _ := histogramCount(t, reg, op); got != want {
			t.Errorf("op %s: %v round trips timed, want %v", op, got, want)
		}
	}
}

// histogramCount is the count of edge_redis_duration_seconds{op=op}, and
// whether that series is listed.
func histogramCount(t *testing.T, reg *prometheus.Registry, op string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "edge_redis_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return float64(m.GetHistogram().GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}
