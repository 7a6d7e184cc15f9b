package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/call"
)

// watchProcedure is the path of Watch.
const watchProcedure = "/grpc.health.v1.Health/Watch"

// ReasonWatchesExceeded refuses a Watch past MaxWatchesPerAddress or
// MaxWatches.
const ReasonWatchesExceeded = "HEALTH_WATCHES_EXCEEDED"

// watcher is who opened a Watch: its client address, and the call's
// record, which must know a stream ended by the edge's shutdown (counted
// as a rollout, not as an error).
type watcher struct {
	addr netip.Addr
	rec  *call.Recorder
}

type watcherKey struct{}

func newWatchHandler(s *Service, opts ...connect.HandlerOption) http.Handler {
	return connect.NewServerStreamHandler(watchProcedure, s.serveWatch, opts...)
}

// serveWatch streams the status of req's service: at once, then at each
// change (looked for every Reuse, from the checks Check uses), until the
// call's deadline (requests.max_stream_timeout at most: deadline_exceeded,
// so the watcher opens a new one), its client leaves or the edge shuts
// down (unavailable, EDGE_SHUTTING_DOWN). A service the edge does not
// serve gets SERVICE_UNKNOWN, as gRPC's health schema says, and nothing
// after it.
func (s *Service) serveWatch(ctx context.Context, req *connect.Request[grpc_health_v1.HealthCheckRequest], stream *connect.ServerStream[grpc_health_v1.HealthCheckResponse]) error {
	wt := ctx.Value(watcherKey{}).(*watcher) // set by ServeHTTP
	if err := s.enter(wt); err != nil {
		return err
	}
	defer s.leave(wt.addr)
	known := s.checker.serves(req.Msg.GetService())
	tick := time.NewTicker(Reuse)
	defer tick.Stop()
	last := grpc_health_v1.HealthCheckResponse_ServingStatus(-1)
	for {
		status := grpc_health_v1.HealthCheckResponse_SERVICE_UNKNOWN
		if known {
			status = grpc_health_v1.HealthCheckResponse_ServingStatus(s.checker.current(ctx))
		}
		if status != last {
			if err := stream.Send(&grpc_health_v1.HealthCheckResponse{Status: status}); err != nil {
				return err
			}
			last = status
		}
		select {
		case <-s.ending:
			return shuttingDown(wt)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the watch reached its deadline; watch again"))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// shuttingDown ends a Watch as every stream ends when the edge shuts down.
func shuttingDown(wt *watcher) error {
	wt.rec.SetUnavailableReason(call.UnavailableShutdown)
	return apierror.New(connect.CodeUnavailable, call.ReasonShuttingDown, "the edge is shutting down; watch again, another replica answers")
}

// enter counts an open Watch of wt's address, or refuses it past the
// bounds.
func (s *Service) enter(wt *watcher) error {
	select {
	case <-s.ending:
		return shuttingDown(wt)
	default:
	}
	addr := wt.addr
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byAddr[addr] >= MaxWatchesPerAddress:
		return apierror.New(connect.CodeResourceExhausted, ReasonWatchesExceeded,
			fmt.Sprintf("at most %d health watches may be open at once from one address; close one first", MaxWatchesPerAddress))
	case s.open >= MaxWatches:
		return apierror.New(connect.CodeResourceExhausted, ReasonWatchesExceeded,
			fmt.Sprintf("this edge has %d health watches open, as many as it keeps; use Check, or watch later", MaxWatches))
	}
	s.open++
	s.byAddr[addr]++
	return nil
}

func (s *Service) leave(addr netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byAddr[addr]--; s.byAddr[addr] == 0 {
		delete(s.byAddr, addr)
	}
}
