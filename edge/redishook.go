package edge

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts the edge's round trips to Redis: one per command sent
// on its own, one per pipeline. Scripts count once, whatever they run.
type roundTrips struct{ n prometheus.Counter }

func newRoundTrips(reg prometheus.Registerer) roundTrips {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_redis_round_trips_total",
		Help: "Round trips from the edge to Redis (a command, a script or a pipeline each).",
	})
	reg.MustRegister(c)
	return roundTrips{c}
}

func (r roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Inc()
		return next(ctx, cmd)
	}
}

func (r roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Inc()
		return next(ctx, cmds)
	}
}

var _ redis.Hook = roundTrips{}
