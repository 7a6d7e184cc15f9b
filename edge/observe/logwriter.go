package observe

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLogBuffer bounds the log bytes waiting to be written.
const DefaultLogBuffer = 4 << 20

// LogFlushEvery is the longest a line waits in the buffer before it is
// written: lines that come in together leave together, in one write.
const LogFlushEvery = 50 * time.Millisecond

// logWriteAt is how many buffered bytes are written at once, without
// waiting for LogFlushEvery (less when the buffer is smaller: half of it).
const logWriteAt = 64 << 10

// LogWriter takes log lines off the request path: Write copies the line
// into a buffer and returns, and one goroutine writes what has gathered, in
// order, in as few writes as it can: a line waits at most LogFlushEvery,
// or less once 64 KiB have gathered, so that a busy edge makes a few
// dozen writes a second rather than one per line or two (each a system
// call, and a wake-up of the writer). When the output cannot keep up and
// the buffer is full, Write drops the line and counts it (Dropped) rather
// than stall calls. Close writes everything still buffered: no line is lost
// on shutdown.
//
// slog handlers write each record with one Write call, so a dropped line is
// a whole line.
type LogWriter struct {
	out     io.Writer
	max     int
	writeAt int           // buffered bytes that are written at once
	kick    chan struct{} // the first line into an empty buffer
	full    chan struct{} // writeAt bytes gathered
	stop    chan struct{} // closed by Close: write what is left, now
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
	w := &LogWriter{
		out: out, max: max, writeAt: min(logWriteAt, max/2),
		kick: make(chan struct{}, 1), full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
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
	was := len(w.buf)
	w.buf = append(w.buf, p...)
	// The writer hears of the first line into an empty buffer (the lines
	// after it wait with it) and of the line that fills writeAt; a signal
	// already pending is enough.
	if was == 0 {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	if was < w.writeAt && len(w.buf) >= w.writeAt {
		select {
		case w.full <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	return len(p), nil
}

// Dropped is how many lines were dropped because the output lagged.
func (w *LogWriter) Dropped() uint64 { return w.dropped.Load() }

// run waits for a first line, then for LogFlushEvery or writeAt bytes,
// whichever comes first, and writes what has gathered; until Close, when
// it writes what is left at once.
func (w *LogWriter) run() {
	defer close(w.done)
	wait := time.NewTimer(LogFlushEvery)
	wait.Stop()
	for {
		select {
		case <-w.kick:
		case <-w.stop:
			w.flush()
			return
		}
		wait.Reset(LogFlushEvery)
		select {
		case <-wait.C:
			select { // a full buffer signalled as the time came: written now
			case <-w.full:
			default:
			}
		case <-w.full:
			wait.Stop()
		case <-w.stop:
			wait.Stop()
		}
		w.flush()
	}
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
	close(w.stop)
	w.mu.Unlock()
	<-w.done
	return nil
}
