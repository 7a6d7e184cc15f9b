package observe

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// redisHook counts and times the edge's round trips to Redis: one per
// command sent on its own, one per pipeline. Scripts count once, whatever
// they run. It also counts the round trips that failed, for every part of
// the edge that uses Redis, so that a Redis in trouble shows whichever part
// meets it first.
type redisHook struct {
	n         prometheus.Counter
	duration  *prometheus.HistogramVec
	errs      *prometheus.CounterVec
	keyPrefix string
	// The series of the round trips nearly every call makes, looked up
	// at their first use (so that /metrics lists an op only once it has
	// been sent) and kept: a lookup by label hashes it and locks the vector.
	evalsha, pipeline *lazyChild[prometheus.Observer]
}

// observer is op's duration series.
func (h redisHook) observer(op string) prometheus.Observer {
	switch op {
	case "evalsha":
		return h.evalsha.get()
	case "pipeline":
		return h.pipeline.get()
	}
	return h.duration.WithLabelValues(op)
}

// redisBuckets span a round trip on loopback (0.1ms) to the longest
// deadline the edge gives a Redis call.
var redisBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// maxOpLen bounds the op label: the edge sends a known set of commands,
// but a label must stay bounded whatever a caller of the client sends.
const maxOpLen = 24

// The parts of the edge that use Redis: the user label of
// edge_redis_errors_total, told apart by the keys they write.
const (
	redisUserLimits      = "limits"      // rate limits and daily caps (rl:…)
	redisUserQuotas      = "quotas"      // environment quotas (q:{…}:envs:…, q:owner:…)
	redisUserStreams     = "streams"     // concurrent-stream leases (q:{…}:streams)
	redisUserIdempotency = "idempotency" // Idempotency-Key entries (idem:…)
	redisUserOther       = "other"       // commands without a key of the edge's (PING, SCRIPT LOAD)
)

// Kinds of failure: the command passed its deadline, or Redis (or the
// network) answered with an error.
const (
	redisErrTimeout = "timeout"
	redisErrError   = "error"
)

func NewRedisHook(reg prometheus.Registerer, keyPrefix string) redisHook {
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "edge_redis_duration_seconds",
		Help:    "Round trips from the edge to Redis by op: the command name (evalsha for a script), or pipeline.",
		Buckets: redisBuckets,
	}, []string{"op"})
	series := func(op string) *lazyChild[prometheus.Observer] {
		return &lazyChild[prometheus.Observer]{make: func() prometheus.Observer { return duration.WithLabelValues(op) }}
	}
	h := redisHook{
		n: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_redis_round_trips_total",
			Help: "Round trips from the edge to Redis (a command, a script or a pipeline each).",
		}),
		duration: duration,
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_redis_errors_total",
			Help: "Round trips to Redis that failed, by user (limits, quotas, streams, idempotency, other), op (the command, or pipeline) and kind (timeout: passed its deadline; error: any other failure). Calls the breaker kept from Redis are not round trips.",
		}, []string{"user", "op", "kind"}),
		keyPrefix: keyPrefix,
		evalsha:   series("evalsha"), pipeline: series("pipeline"),
	}
	for _, user := range []string{redisUserLimits, redisUserQuotas, redisUserStreams, redisUserIdempotency} {
		for _, kind := range []string{redisErrTimeout, redisErrError} {
			h.errs.WithLabelValues(user, "evalsha", kind)
		}
	}
	reg.MustRegister(h.n, h.duration, h.errs)
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
		h.observer(op).Observe(time.Since(start).Seconds())
		h.failed(ctx, cmd, op, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Inc()
		start := time.Now()
		err := next(ctx, cmds)
		h.observer("pipeline").Observe(time.Since(start).Seconds())
		if len(cmds) > 0 {
			h.failed(ctx, cmds[0], "pipeline", err)
		}
		return err
	}
}

// failed counts err, if it is a failure of Redis: not a missing key
// (redis.Nil), not a script Redis has yet to load (NOSCRIPT, which the
// client answers with EVAL), not a caller that gave up.
func (h redisHook) failed(ctx context.Context, cmd redis.Cmder, op string, err error) {
	if err == nil || errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return
	}
	kind := redisErrError
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = redisErrTimeout
	case errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled:
		return
	}
	h.errs.WithLabelValues(h.user(cmd), op, kind).Inc()
}

// user tells which part of the edge sent cmd, from its first key.
func (h redisHook) user(cmd redis.Cmder) string {
	args := cmd.Args()
	i := 1
	switch cmd.Name() {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall":
		i = 3 // EVALSHA sha numkeys key…
	}
	if i >= len(args) {
		return redisUserOther
	}
	var key string
	switch k := args[i].(type) {
	case string:
		key = k
	case *string: // the limit script's keys (ratelimit's keys.command)
		key = *k
	default:
		return redisUserOther
	}
	key, ok := strings.CutPrefix(key, h.keyPrefix)
	switch {
	case !ok:
		return redisUserOther
	case strings.HasPrefix(key, "rl:"):
		return redisUserLimits
	case strings.HasPrefix(key, "idem:"):
		return redisUserIdempotency
	case strings.HasPrefix(key, "q:") && strings.HasSuffix(key, ":streams"):
		return redisUserStreams
	case strings.HasPrefix(key, "q:"):
		return redisUserQuotas
	}
	return redisUserOther
}

var _ redis.Hook = redisHook{}
