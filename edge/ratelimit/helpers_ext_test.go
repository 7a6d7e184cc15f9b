package ratelimit_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/internal/testenv"
)

// The shipped plan numbers, as a caller would pass them.
var (
	freePlan = ratelimit.Limit{Name: "plan", Rate: 60, Period: time.Minute, Burst: 100}
	createOp = ratelimit.Limit{Name: "op:CreateEnvironment", Rate: 10, Period: time.Minute, Burst: 10}
)

const freeDaily = 10_000

// clock is an edge clock that only moves when told.
type clock = testenv.Clock

func newClock(t time.Time) *clock { return testenv.NewClock(t) }

// forEachRedis runs f against every real Redis the suite must pass on.
func forEachRedis(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	for _, name := range []string{"redis", "cluster"} {
		target := testenv.RedisTargets()[name]
		t.Run(name, func(t *testing.T) { f(t, target(t)) })
	}
}

// together runs f(0) to f(n-1) on n goroutines released at the same
// moment, and returns when every one has returned.
func together(n int, f func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			f(g)
		})
	}
	close(start)
	wg.Wait()
}

func allow(t *testing.T, l *ratelimit.Limiter, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), req)
	if err != nil {
		t.Fatalf("Allow(%+v): %v", req, err)
	}
	return d
}

// state returns the decision's state for the named limit.
func state(t *testing.T, d ratelimit.Decision, name string) ratelimit.State {
	t.Helper()
	for _, s := range d.States {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no state for %q in %+v", name, d)
	return ratelimit.State{}
}

// counter is a go-redis hook that counts the commands a client sends.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// logBuffer is a slog.Logger whose lines a test can read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
