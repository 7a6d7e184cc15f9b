package observe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RedisLog carries the Redis client's own log lines (go-redis writes
// plain text to stderr by default: failed dials during an outage, Sentinel's
// master changes) into the edge's structured logger, at most Burst lines
// per Interval; the next line written after a quiet spell says how many
// were left out ("suppressed"). Install it with redis.SetLogger: it
// implements go-redis' Logging interface.
type RedisLog struct {
	log      *slog.Logger
	interval time.Duration
	burst    int
	now      func() time.Time

	mu         sync.Mutex
	windowFrom time.Time
	written    int
	suppressed int
}

// Defaults of NewRedisLog: during an outage a pool fails a dial per idle
// connection it keeps (32 by default) every few seconds; a handful of lines
// a minute say as much.
const (
	DefaultRedisLogInterval = time.Minute
	DefaultRedisLogBurst    = 5
	// maxRedisLogLine bounds one line: go-redis quotes server errors.
	maxRedisLogLine = 1024
)

// NewRedisLog returns a RedisLog writing to log, at most burst lines per
// interval (the defaults for values <= 0).
func NewRedisLog(log *slog.Logger, interval time.Duration, burst int) *RedisLog {
	if interval <= 0 {
		interval = DefaultRedisLogInterval
	}
	if burst <= 0 {
		burst = DefaultRedisLogBurst
	}
	return &RedisLog{log: log, interval: interval, burst: burst, now: time.Now}
}

// Printf logs one line of the Redis client at warning level: the client
// logs only what went wrong, or a Sentinel's change of master.
func (l *RedisLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.windowFrom) >= l.interval {
		l.windowFrom, l.written = now, 0
	}
	if l.written >= l.burst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.written++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()

	line := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	if len(line) > maxRedisLogLine {
		line = line[:maxRedisLogLine] + "…"
	}
	attrs := []any{"line", line}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.WarnContext(ctx, "redis client", attrs...)
}
