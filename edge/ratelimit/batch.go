package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxPipelines is how many pipelines of limit scripts may be on the wire
// at once.
const maxPipelines = 4

// maxBatch bounds one pipeline. A second pipeline leaves beside the one on
// the wire only when a full batch is waiting: until then the calls that
// arrive wait for the pipeline's return, at most one round trip, and leave
// together. So under load the calls gather into few, full pipelines (on a
// nearby Redis, one write and one read on each side for many calls), and
// a slow or distant Redis still gets several pipelines at once when one
// would not keep up.
const maxBatch = 32

// batcher sends the limit scripts of concurrent calls to Redis together.
// Each call still runs its own script, with its own keys, and gets its own
// exact decision; but the calls that arrive while others are on the wire
// leave in one pipeline: one write and one read for all of them, on the
// edge's side and on Redis'. A lone call goes out at once, as before.
//
// The pipelines are sent by workers that wait for the next batch for
// workerIdle before they end. A goroutine started per batch instead grew
// its stack through go-redis on nearly every call at a low rate (a stack
// copy, 14,000 instructions a call: docs/benchmarks.md); a worker keeps
// its stack from batch to batch. No goroutine outlives the calls it serves
// by more than workerIdle.
type batcher struct {
	rdb     redis.UniversalClient
	timeout time.Duration

	mu       sync.Mutex
	queue    []*scriptCall
	inflight int           // pipelines on the wire, each sent by a worker in flush
	idle     int           // workers waiting for a kick, none of them claimed
	kick     chan struct{} // to a claimed idle worker; room for every worker
}

// workerIdle is how long a worker waits for another batch before it ends.
const workerIdle = time.Second

func newBatcher(rdb redis.UniversalClient, timeout time.Duration) *batcher {
	return &batcher{rdb: rdb, timeout: timeout, kick: make(chan struct{}, maxPipelines)}
}

// scriptCall is one call's script run. Its caller waits for it until its
// context ends or its deadline passes.
type scriptCall struct {
	ctx      context.Context
	deadline time.Time
	cmd      []any                // the EVALSHA, keys.command
	done     chan result[[]int64] // buffered: the batch never waits for its caller
}

// scriptCalls are scriptCalls whose answer their caller took (done is
// empty), for run to use again: three allocations fewer on each call (the
// call, its channel, and the channel's buffer, which holds pointers).
var scriptCalls sync.Pool

// run queues one script run and returns it: its done channel gets its
// answer. A caller that took the answer from done may hand it back with
// release; one that gave up first must not (the batch may still hold it).
func (b *batcher) run(ctx context.Context, deadline time.Time, cmd []any) *scriptCall {
	c, _ := scriptCalls.Get().(*scriptCall)
	if c == nil {
		c = &scriptCall{done: make(chan result[[]int64], 1)}
	}
	c.ctx, c.deadline, c.cmd = ctx, deadline, cmd
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := b.inflight == 0 || b.inflight < maxPipelines && len(b.queue) >= maxBatch
	start := false
	if lead {
		b.inflight++
		if b.idle > 0 {
			b.idle--
			b.kick <- struct{}{} // never blocks: a kick per claimed worker
		} else {
			start = true
		}
	}
	b.mu.Unlock()
	if start {
		go b.work()
	}
	return c
}

// release hands back a scriptCall whose answer was taken from its done
// channel: the batch sent it last (send does not touch a call after its
// answer), so nothing else holds it.
func release(c *scriptCall) {
	c.ctx, c.cmd = nil, nil
	scriptCalls.Put(c)
}

// work flushes the queue, then waits for a kick to flush it again, until
// none comes for workerIdle. Its idle timer is not reset after each batch
// (a change of the runtime's timer heap on nearly every call): it fires at
// most once a workerIdle, and the worker ends only when it has waited that
// long since its last batch.
func (b *batcher) work() {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		b.flush()
		b.mu.Lock()
		b.idle++
		b.mu.Unlock()
		if !b.waitKick(idle, time.Now()) {
			return
		}
	}
}

// waitKick waits for a kick, idle since since; false when none came for
// workerIdle and the worker is to end.
func (b *batcher) waitKick(idle *time.Timer, since time.Time) bool {
	for {
		select {
		case <-b.kick:
			return true
		case <-idle.C:
		}
		if left := workerIdle - time.Since(since); left > 0 {
			idle.Reset(left) // it fired for an earlier wait
			continue
		}
		b.mu.Lock()
		if b.idle > 0 {
			// Not claimed: this worker ends.
			b.idle--
			b.mu.Unlock()
			return false
		}
		b.mu.Unlock()
		// Claimed as the timer fired: its kick is on the way.
		<-b.kick
		idle.Reset(workerIdle)
		return true
	}
}

// flush sends what is queued, batch after batch, until the queue is empty;
// its caller was counted in inflight.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		batch := make([]*scriptCall, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		b.send(batch)
	}
}

// send runs one batch in one pipeline. Calls whose caller has given up
// are left out: they must not consume anything nobody is told about.
func (b *batcher) send(batch []*scriptCall) {
	live := batch[:0]
	now := time.Now()
	for _, c := range batch {
		err := c.ctx.Err()
		if err == nil && !now.Before(c.deadline) {
			err = context.DeadlineExceeded
		}
		if err != nil {
			c.done <- result[[]int64]{err: err}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	// The batch runs until the last of its callers gives up, so that no
	// call is cut short by another's earlier deadline.
	deadline := now.Add(b.timeout)
	for _, c := range live {
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(live[0].ctx), deadline)
	defer cancel()
	if len(live) == 1 {
		c := live[0]
		cmd := scriptCmd(ctx, c.cmd)
		_ = b.rdb.Process(ctx, cmd)
		if noScript(cmd.Err()) {
			// That node (restarted, failed over, flushed) lost the
			// script: EVAL sends it with the call and loads it, in one
			// round trip, as go-redis' Script.Run does.
			eval := append([]any{"eval", allowLua}, c.cmd[2:]...)
			cmd = scriptCmd(ctx, eval)
			_ = b.rdb.Process(ctx, cmd)
		}
		v, err := cmd.Result()
		c.done <- result[[]int64]{v, err}
		return
	}
	cmds := b.pipeline(ctx, live)
	var again []*scriptCall
	for i, c := range live {
		if noScript(cmds[i].Err()) {
			// That node (restarted, failed over, flushed) lost the
			// script, so this call's script did not run: it runs again
			// once the script is loaded. The others ran: never twice.
			again = append(again, c)
			continue
		}
		v, err := cmds[i].Result()
		c.done <- result[[]int64]{v, err}
	}
	if len(again) == 0 {
		return
	}
	if err := allowScript.Load(ctx, b.rdb).Err(); err != nil {
		for _, c := range again {
			c.done <- result[[]int64]{err: err}
		}
		return
	}
	cmds = b.pipeline(ctx, again)
	for i, c := range again {
		v, err := cmds[i].Result()
		c.done <- result[[]int64]{v, err}
	}
}

func (b *batcher) pipeline(ctx context.Context, batch []*scriptCall) []*redis.IntSliceCmd {
	cmds := make([]*redis.IntSliceCmd, len(batch))
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = scriptCmd(ctx, c.cmd)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	return cmds
}

// scriptCmd is the command of a call's script: its first key, which
// routes it on a Redis Cluster, is its fourth argument (EVALSHA, hash,
// number of keys, keys...). Its answer is all integers (allow.lua), read
// into one []int64.
func scriptCmd(ctx context.Context, args []any) *redis.IntSliceCmd {
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// noScript reports the error of a node that lacks the script.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
