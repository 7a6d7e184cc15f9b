package edge_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/observe"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// lockedBuffer is an output that may be written from several goroutines;
// while gate is set, writes wait for it.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	gate   chan struct{}
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	if b.gate != nil {
		<-b.gate
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) writeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
}

// Every line written before Close is out, whole and in each writer's
// order, after Close.
func TestLogWriterLosesNoLineOnClose(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := observe.NewLogWriter(out, 0)
	log := slog.New(slog.NewTextHandler(w, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				log.Info("call", "g", g, "i", i)
			}
		})
	}
	wg.Wait()
	_ = w.Close()
	lines := out.lines()
	if len(lines) != 16000 {
		t.Fatalf("%d lines out, want 16000", len(lines))
	}
	next := map[string]int{}
	for _, l := range lines {
		var g, i int
		if _, err := fmt.Sscanf(l[strings.Index(l, " g=")+1:], "g=%d i=%d", &g, &i); err != nil {
			t.Fatalf("torn line %q: %v", l, err)
		}
		if key := fmt.Sprint(g); next[key] != i {
			t.Fatalf("goroutine %d: line %d after line %d", g, i, next[key]-1)
		}
		next[fmt.Sprint(g)]++
	}
	if d := w.Dropped(); d != 0 {
		t.Errorf("%d lines dropped", d)
	}
	log.Info("after close") // written directly
	if l := out.lines(); !strings.Contains(l[len(l)-1], "after close") {
		t.Errorf("a line written after Close is missing")
	}
}

// A lone line comes out without Close and without more lines behind it:
// the writer does not wait for a full buffer.
func TestLogWriterWritesALoneLine(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := observe.NewLogWriter(out, 0)
	defer w.Close()
	_, _ = w.Write([]byte("alone\n"))
	testkit.WaitFor(t, "the lone line on the output", func() bool { return out.String() == "alone\n" })
	_, _ = w.Write([]byte("later\n")) // into the emptied buffer: it comes out too
	testkit.WaitFor(t, "the next line on the output", func() bool { return out.String() == "alone\nlater\n" })
}

// Lines that come in one after another, as a busy edge's access lines do,
// leave together: at most one write (a system call on stderr, and a wake-up
// of the writer) each LogFlushEvery, not one a line or two, every line
// whole and in order.
func TestLogWriterGathersLinesIntoFewWrites(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{}
	w := observe.NewLogWriter(out, 0)
	var want strings.Builder
	start := time.Now()
	for i := range 200 {
		line := fmt.Sprintf("call %03d %s\n", i, strings.Repeat("x", 90))
		want.WriteString(line)
		_, _ = w.Write([]byte(line))
		time.Sleep(time.Millisecond) // the pace of calls, not a wait for the writer
	}
	took := time.Since(start)
	_ = w.Close()
	if out.String() != want.String() {
		t.Fatal("the output is not the lines written, in order")
	}
	// 20 KB, below the 64 KiB that is written at once: one write each
	// LogFlushEvery the lines took to come, one for Close, one for the
	// period under way. A slow machine stretches the pace, and the bound
	// with it.
	if n, most := out.writeCount(), int(took/observe.LogFlushEvery)+2; n > most {
		t.Errorf("%d writes for 200 lines over %v, want at most %d", n, took.Round(time.Millisecond), most)
	}
}

// When the output stalls, writes neither block nor grow the buffer past
// its bound: lines are dropped and counted, and the rest come out once the
// output moves again.
func TestLogWriterDropsAndCountsWhenTheOutputStalls(t *testing.T) {
	t.Parallel()
	out := &lockedBuffer{gate: make(chan struct{})}
	w := observe.NewLogWriter(out, 4096)
	line := strings.Repeat("x", 99) + "\n"
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			_, _ = w.Write([]byte(line))
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("writes block while the output stalls")
	}
	close(out.gate)
	_ = w.Close()
	written := len(out.lines())
	if d := w.Dropped(); d == 0 || uint64(written)+d != 1000 {
		t.Fatalf("written %d + dropped %d, want 1000 with some dropped", written, d)
	}
	// At most the buffer's worth (plus the batch the writer held) got through.
	if written > 2*4096/100+1 {
		t.Errorf("%d lines written past a 4KiB buffer", written)
	}
}

// log.sample_ok 0 logs no successful call, and every other outcome still.
func TestAccessLogSamplesOnlySuccessfulCalls(t *testing.T) {
	t.Parallel()
	s, token := startTracedStack(t, orgsvc.Config{}, func(c *config.Config) { c.Log.SampleOK = 0 })
	ctx := ctxT(t)
	c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("pro-sampled")).Org
	for range 5 {
		if _, err := c.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); err != nil {
			t.Fatal(err)
		}
	}
	bad := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, "not-a-token").Org
	if _, err := bad.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("bad token: %v", err)
	}
	testkit.WaitFor(t, "the refused call's access line", func() bool { return strings.Contains(s.edgeLog.String(), `"code":"unauthenticated"`) })
	log := s.edgeLog.String()
	if n := strings.Count(log, `"msg":"call"`); n != 1 || !strings.Contains(log, `"code":"unauthenticated"`) {
		t.Errorf("%d access lines, want only the refused call's:\n%s", n, log)
	}
}
