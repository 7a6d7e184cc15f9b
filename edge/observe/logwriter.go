package observe

import (
	"io"
	"sync"
	"sync/atomic"
)

// DefaultLogBuffer bounds the log bytes waiting to be written.
const DefaultLogBuffer = 4 << 20

// LogWriter takes log lines off the request path: Write copies the line
// into a buffer and returns, and one goroutine writes what has gathered, in
// order, in as few writes as it can. When the output cannot keep up and the
// buffer is full, Write drops the line and counts it (Dropped) rather than
// stall calls. Close writes everything still buffered: no line is lost on
// shutdown.
//
// slog handlers write each record with one Write call, so a dropped line is
// a whole line.
type LogWriter struct {
	out     io.Writer
	max     int
	kick    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64

	mu     sync.Mutex
	buf    []byte // gathered, not yet handed to the writer
	spare  []byte
	closed bool
}

// NewLogWriter returns a LogWriter onto out buffering at most max bytes
// (DefaultLogBuffer when max <= 0), and starts its goroutine.
func NewLogWriter(out io.Writer, max int) *LogWriter {
	if max <= 0 {
		max = DefaultLogBuffer
	}
	w := &LogWriter{out: out, max: max, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// Write buffers p, or drops it when the buffer is full. After Close it
// writes p directly.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		defer w.mu.Unlock()
		return w.out.Write(p)
	}
	if len(w.buf)+len(p) > w.max {
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	select { // under the lock: Close closes kick under it too
	case w.kick <- struct{}{}:
	default: // the writer is awake already
	}
	w.mu.Unlock()
	return len(p), nil
}

// Dropped is how many lines were dropped because the output lagged.
func (w *LogWriter) Dropped() uint64 { return w.dropped.Load() }

func (w *LogWriter) run() {
	defer close(w.done)
	for range w.kick {
		w.flush()
	}
	w.flush()
}

// flush writes what has gathered. Only run calls it, so writes keep their
// order.
func (w *LogWriter) flush() {
	w.mu.Lock()
	batch := w.buf
	w.buf = w.spare[:0]
	w.mu.Unlock()
	if len(batch) > 0 {
		_, _ = w.out.Write(batch)
	}
	w.mu.Lock()
	if cap(batch) <= w.max*2 { // keep one spare buffer, not an outsized one
		w.spare = batch[:0]
	} else {
		w.spare = nil
	}
	w.mu.Unlock()
}

// Close writes every buffered line and makes later writes direct.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.kick)
	w.mu.Unlock()
	<-w.done
	return nil
}
