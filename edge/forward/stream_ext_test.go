package forward_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/forward"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testkit"
)

// watcher is a backend whose WatchEnvironment sends one message, then
// holds the stream open until the edge cancels it (or it ends by itself
// with end, if set).
type watcher struct {
	svcv1connect.UnimplementedEnvironmentServiceHandler
	end bool
}

func (w watcher) WatchEnvironment(ctx context.Context, _ *connect.Request[svcv1.WatchEnvironmentRequest], s *connect.ServerStream[svcv1.WatchEnvironmentResponse]) error {
	if err := s.Send(&svcv1.WatchEnvironmentResponse{}); err != nil {
		return err
	}
	if w.end {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func h2cServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func h2cClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type ended struct{ result, reason string }

// streamEdge is the forward step alone in front of backend w, behind a
// stand-in for the chain that gives each call its state (its token
// expiring at expires, if set) and reports the call's recorded result.
func streamEdge(t *testing.T, w watcher, expires time.Time) (*forward.Step, string, <-chan ended) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewEnvironmentServiceHandler(w))
	backend := h2cServer(t, mux)
	up, err := url.Parse(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	step := forward.New(forward.Options{Upstream: up, Transport: h2cClient(t).Transport, Tracing: observe.NewTracing(nil),
		Logger: slog.New(slog.DiscardHandler), StreamWriteTimeout: 10 * time.Second})
	procs := wire.Procedures{}
	for name, info := range config.Procedures() {
		procs[name] = info.Streaming()
	}
	results := make(chan ended, 4)
	front := h2cServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c, problem := wire.Classify(r, procs)
		if problem != 0 {
			http.Error(rw, "not classified", http.StatusBadRequest)
			return
		}
		rec := call.NewRecorder(rw, c)
		step.ServeHTTP(rec, r.WithContext(call.With(r.Context(), &call.State{Call: c, Rec: rec, Expires: expires})))
		results <- ended{rec.Result(c, r.Context().Err() != nil), rec.UnavailableReason()}
	}))
	return step, front.URL, results
}

var streamProtocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"connect+json", []connect.ClientOption{connect.WithProtoJSON()}},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// watch opens WatchEnvironment through the edge and returns the stream once
// its first message has come.
func watch(t *testing.T, url string, opts []connect.ClientOption) *connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse] {
	t.Helper()
	s := open(t, url, opts)
	if !s.Receive() {
		t.Fatalf("no first message: %v", s.Err())
	}
	return s
}

// open opens WatchEnvironment through the edge.
func open(t *testing.T, url string, opts []connect.ClientOption) *connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := svcv1connect.NewEnvironmentServiceClient(h2cClient(t), url, opts...).
		WatchEnvironment(ctx, connect.NewRequest(&svcv1.WatchEnvironmentRequest{EnvironmentId: "env-1"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// end reads the stream to its end and returns how it ended.
func end(s *connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse]) error {
	for s.Receive() {
	}
	return s.Err()
}

func result(t *testing.T, results <-chan ended) ended {
	t.Helper()
	select {
	case e := <-results:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not end at the edge")
		return ended{}
	}
}

func TestEndStreamsEndsOpenStreamsUnavailableInTheirProtocol(t *testing.T) {
	step, url, results := streamEdge(t, watcher{}, time.Time{})
	var streams []*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse]
	for _, p := range streamProtocols {
		streams = append(streams, watch(t, url, p.opts))
	}
	step.EndStreams()
	for i, s := range streams {
		err := end(s)
		if connect.CodeOf(err) != connect.CodeUnavailable || testkit.Reason(err) != call.ReasonShuttingDown {
			t.Errorf("%s: the stream ended %v (reason %q), want unavailable %s", streamProtocols[i].name, err, testkit.Reason(err), call.ReasonShuttingDown)
		}
	}
	for range streams {
		if e := result(t, results); e.result != "unavailable" || e.reason != call.UnavailableShutdown {
			t.Errorf("recorded %q about %q, want unavailable about %s", e.result, e.reason, call.UnavailableShutdown)
		}
	}
	// A stream opened after EndStreams ends at once.
	if err := end(open(t, url, nil)); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a stream opened while shutting down ended %v, want unavailable", err)
	}
}

func TestAStreamEndsUnauthenticatedWhenItsTokenExpires(t *testing.T) {
	for _, p := range streamProtocols {
		t.Run(p.name, func(t *testing.T) {
			// The token expires soon after the stream opened; the backend
			// would hold it open for ever.
			_, url, results := streamEdge(t, watcher{}, time.Now().Add(500*time.Millisecond))
			err := end(open(t, url, p.opts))
			if connect.CodeOf(err) != connect.CodeUnauthenticated || testkit.Reason(err) != identity.ReasonTokenExpired {
				t.Fatalf("the stream ended %v (reason %q), want unauthenticated %s", err, testkit.Reason(err), identity.ReasonTokenExpired)
			}
			if e := result(t, results); e.result != "unauthenticated" {
				t.Fatalf("recorded %q, want unauthenticated", e.result)
			}
		})
	}
}

func TestAStreamTheBackendEndsIsOK(t *testing.T) {
	_, url, results := streamEdge(t, watcher{end: true}, time.Now().Add(time.Hour))
	for _, p := range streamProtocols {
		t.Run(p.name, func(t *testing.T) {
			if err := end(watch(t, url, p.opts)); err != nil {
				t.Fatalf("the stream ended %v, want its clean end", err)
			}
			if e := result(t, results); e.result != "ok" {
				t.Fatalf("recorded %q, want ok", e.result)
			}
		})
	}
}
