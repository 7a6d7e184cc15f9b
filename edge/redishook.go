package edge

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// redisHook counts and times the edge's round trips to Redis: one per
// command sent on its own, one per pipeline. Scripts count once, whatever
// they run.
type redisHook struct {
	n        prometheus.Counter
	duration *prometheus.HistogramVec
}

// redisBuckets span a round trip on loopback (0.1ms) to the longest
// deadline the edge gives a Redis call.
var redisBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// maxOpLen bounds the op label: the edge sends a known set of commands,
// but a label must stay bounded whatever a caller of the client sends.
const maxOpLen = 24

func newRedisHook(reg prometheus.Registerer) redisHook {
	h := redisHook{
		n: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_redis_round_trips_total",
			Help: "Round trips from the edge to Redis (a command, a script or a pipeline each).",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edge_redis_duration_seconds",
			Help:    "Round trips from the edge to Redis by op: the command name (evalsha for a script), or pipeline.",
			Buckets: redisBuckets,
		}, []string{"op"}),
	}
	reg.MustRegister(h.n, h.duration)
	return h
}

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Inc()
		start := time.Now()
		err := next(ctx, cmd)
		op := cmd.Name() // lower case
		if len(op) > maxOpLen {
			op = "other"
		}
		h.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Inc()
		start := time.Now()
		err := next(ctx, cmds)
		h.duration.WithLabelValues("pipeline").Observe(time.Since(start).Seconds())
		return err
	}
}

var _ redis.Hook = redisHook{}
