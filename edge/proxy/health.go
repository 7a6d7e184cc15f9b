package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthCheck configures the pool's active checks of its backends: gRPC
// health checking (grpc.health.v1.Health/Check) on each backend's own
// address, over the h2c connections that carry its calls.
type HealthCheck struct {
	// Interval between two checks of a backend; 0: no checks, and no
	// ejection on timeouts either.
	Interval time.Duration
	// Timeout bounds one check: a backend that takes longer fails it.
	Timeout time.Duration
	// UnhealthyThreshold failed checks in a row take a backend out of
	// the pool until HealthyThreshold passed checks in a row bring it back.
	UnhealthyThreshold, HealthyThreshold int
	// Service is the service name checked; "": the server as a whole.
	Service string
}

// healthProcedure is gRPC health checking's one unary method.
const healthProcedure = "/grpc.health.v1.Health/Check"

// health is one backend's standing in the checks. One check of a backend
// runs at a time (checking), which orders the updates of passes and
// failures.
type health struct {
	unhealthy atomic.Bool
	checking  atomic.Bool
	passes    atomic.Int32
	failures  atomic.Int32
	suspected atomic.Int64 // when a check was last asked for out of turn, unix nanoseconds
	changed   atomic.Int64 // when unhealthy last changed, unix nanoseconds; 0: never
	last      atomic.Pointer[CheckResult]
}

// CheckResult is the result of one health check of a backend.
type CheckResult struct {
	At    time.Time
	Error string // "": it passed
}

// healthLoop checks every backend now and every Interval.
func (p *Pool) healthLoop() {
	defer p.done.Done()
	t := time.NewTicker(p.opts.HealthCheck.Interval)
	defer t.Stop()
	for {
		for _, e := range *p.endpoints.Load() {
			go p.check(e, false)
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// suspect asks for a check of e out of turn: a call's deadline ran out
// while e held it. The call says nothing of e by itself (its caller may
// have allowed it a nanosecond); the check, under the edge's own timeout,
// does. At most one such check per Timeout, so that callers with short
// deadlines cannot make the edge check a backend more often than that.
func (p *Pool) suspect(e *endpoint) {
	hc := p.opts.HealthCheck
	if hc.Interval <= 0 {
		return
	}
	now := time.Now().UnixNano()
	last := e.health.suspected.Load()
	if now-last < int64(hc.Timeout) || !e.health.suspected.CompareAndSwap(last, now) {
		return
	}
	go p.check(e, true)
}

// check checks e once, unless a check of e runs already, and moves it in
// or out of the pool by the thresholds. A backend that fails a check asked
// for by a timed-out call (suspected) is also ejected at once: an outlier
// on timeouts.
func (p *Pool) check(e *endpoint, suspected bool) {
	h := &e.health
	if !h.checking.CompareAndSwap(false, true) {
		return
	}
	defer h.checking.Store(false)
	hc := p.opts.HealthCheck
	ctx, cancel := context.WithTimeout(p.ctx, hc.Timeout)
	err := p.probe(ctx, e)
	cancel()
	if p.ctx.Err() != nil {
		return // the pool is closing
	}
	result := &CheckResult{At: time.Now()}
	if err != nil {
		result.Error = err.Error()
	}
	h.last.Store(result)
	if err == nil {
		h.failures.Store(0)
		if h.passes.Add(1) >= int32(hc.HealthyThreshold) && h.unhealthy.CompareAndSwap(true, false) {
			h.changed.Store(result.At.UnixNano())
			p.opts.Logger.Info("backend passes its health checks again", "backend", e.addr)
			e.obs.Healthy(true)
		}
		return
	}
	h.passes.Store(0)
	if h.failures.Add(1) >= int32(hc.UnhealthyThreshold) && h.unhealthy.CompareAndSwap(false, true) {
		h.changed.Store(result.At.UnixNano())
		p.opts.Logger.Warn("backend fails its health checks: it gets no calls", "backend", e.addr, "err", err)
		e.obs.Healthy(false)
	}
	if suspected {
		p.eject(e, time.Now(), EjectedTimeout, err)
	}
}

// probe sends one gRPC health check to e.
func (p *Pool) probe(ctx context.Context, e *endpoint) error {
	hc := &http.Client{Transport: e.transport(p, time.Now()).h2}
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](hc,
		"http://"+e.addr+healthProcedure, connect.WithGRPC())
	req := connect.NewRequest(&healthpb.HealthCheckRequest{Service: p.opts.HealthCheck.Service})
	if v := p.via.h2; v != nil { // over h2c, as a call
		req.Header()["Via"] = v
	}
	res, err := client.CallUnary(ctx, req)
	if err != nil {
		return err
	}
	if s := res.Msg.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health check: %s", s)
	}
	return nil
}
