package edge_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/grpchealth"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
)

// countingBackend is one backend process's stand-in: an OrganizationService
// on its own port (HTTP/1.1 and h2c) that counts the calls it answers.
type countingBackend struct {
	svcv1connect.UnimplementedOrganizationServiceHandler
	url      string
	srv      *http.Server
	calls    atomic.Int64
	mu       sync.Mutex
	inflight int
	dead     bool
	late     int // calls that reached it after it was killed
	conns    int // open connections
}

func (b *countingBackend) GetOrganization(ctx context.Context, r *connect.Request[svcv1.GetOrganizationRequest]) (*connect.Response[svcv1.Organization], error) {
	b.mu.Lock()
	if b.dead {
		b.late++
		b.mu.Unlock()
		panic(http.ErrAbortHandler) // the connection drops, as a killed process's would
	}
	b.inflight++
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.inflight--; b.mu.Unlock() }()
	b.calls.Add(1)
	// A little work, so that calls are in flight when the backend dies.
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
	}
	return connect.NewResponse(&svcv1.Organization{Id: r.Msg.GetOrganizationId(), Name: "n"}), nil
}

func startCountingBackend(t *testing.T) *countingBackend {
	t.Helper()
	b := &countingBackend{}
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewOrganizationServiceHandler(b))
	// Serving, as a real backend answers the edge's health checks.
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	b.srv = &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			b.mu.Lock()
			defer b.mu.Unlock()
			switch s {
			case http.StateNew:
				b.conns++
			case http.StateClosed, http.StateHijacked:
				b.conns--
			}
		}}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close() })
	b.url = "http://" + ln.Addr().String()
	return b
}

// kill stops the backend the way a killed process stops: every connection
// drops at once. It returns the calls its handlers had in flight and its
// open connections: a call the edge had written on a connection that the
// backend had not read yet is in flight on it too, and over HTTP/1.1 a
// connection carries at most one call. Its port stays dead until the test
// ends: in a parallel run another test's server could otherwise take it,
// and the edge's health check would bring the "killed" backend back as
// that server, whose answers are not this one's.
func (b *countingBackend) kill(t *testing.T) (inflight, conns int) {
	t.Helper()
	b.mu.Lock()
	b.dead = true
	inflight, conns = b.inflight, b.conns
	b.mu.Unlock()
	_ = b.srv.Close()
	testkit.KeepDead(t, strings.TrimPrefix(b.url, "http://"))
	return inflight, conns
}

func startThreeBackends(t *testing.T) ([]*countingBackend, *testkit.Edge, string) {
	t.Helper()
	iss := testkit.SharedIssuer(t)
	var bes []*countingBackend
	var urls []string
	for range 3 {
		b := startCountingBackend(t)
		bes = append(bes, b)
		urls = append(urls, b.url)
	}
	cfg := testkit.EdgeConfig(t, urls[0], iss.URL())
	cfg.Upstream.URLs = urls
	plan := cfg.Limits.Plans["enterprise"]
	plan.RequestsPerMinute, plan.Burst, plan.RequestsPerDay = 1_000_000, 10_000, 0 // room for every call
	cfg.Limits.Plans["enterprise"] = plan
	e := testkit.StartEdge(t, cfg)
	return bes, e, testkit.Token(t, iss.URL(), "enterprise-spread")
}

// callMany makes n GetOrganization calls from workers goroutines and
// returns the errors.
func callMany(ctx context.Context, c svcv1connect.OrganizationServiceClient, n, workers int) []error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				// Each call is bounded (a hang fails it), not the batch: on a
				// busy machine 300 calls one after the other outlast a minute.
				callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := c.GetOrganization(callCtx, connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: "org_1"}))
				cancel()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func wantEvenSpread(t *testing.T, counts []int64) {
	t.Helper()
	var total int64
	for _, c := range counts {
		total += c
	}
	even := float64(total) / float64(len(counts))
	for i, c := range counts {
		if d := float64(c) - even; d > even/10 || d < -even/10 {
			t.Errorf("backend %d got %d of %d calls, not within 10%% of %.0f (all: %v)", i, c, total, even, counts)
		}
	}
}

// Calls of every protocol spread evenly over three backends: HTTP/JSON and
// Connect over pooled HTTP/1.1, gRPC over h2c.
func TestUpstreamSpreadsCallsOverEveryBackend(t *testing.T) {
	t.Parallel()
	bes, e, token := startThreeBackends(t)
	for _, p := range []testkit.Protocol{testkit.HTTPJSON, testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			before := make([]int64, len(bes))
			for i, b := range bes {
				before[i] = b.calls.Load()
			}
			if errs := callMany(t.Context(), testkit.NewClients(e.URL, p, token).Org, 300, 6); len(errs) > 0 {
				t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
			}
			counts := make([]int64, len(bes))
			for i, b := range bes {
				counts[i] = b.calls.Load() - before[i]
			}
			wantEvenSpread(t, counts)
		})
	}
}

// A backend killed under load costs at most the calls it had in flight:
// the calls whose connection it refuses afterwards go to the others, and it
// gets no more calls while ejected.
func TestUpstreamKilledBackendCostsOnlyItsCallsInFlight(t *testing.T) {
	t.Parallel()
	bes, e, token := startThreeBackends(t)
	org := testkit.NewClients(e.URL, testkit.HTTPJSON, token).Org
	ctx := ctxT(t)
	if errs := callMany(ctx, org, 150, 6); len(errs) > 0 {
		t.Fatalf("before the kill: %d calls failed, first: %v", len(errs), errs[0])
	}

	var (
		stop     atomic.Bool
		failures atomic.Int64
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error] // the first call's error, whatever its type
	)
	for range 6 {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := org.GetOrganization(ctx, connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: "org_1"})); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	// Kill one backend once the load runs over all three.
	start := bes[1].calls.Load()
	for deadline := time.Now().Add(10 * time.Second); bes[1].calls.Load() < start+30; {
		if time.Now().After(deadline) {
			t.Fatal("backend 1 gets no calls")
		}
		time.Sleep(time.Millisecond)
	}
	inflight, conns := bes[1].kill(t)
	after := []int64{bes[0].calls.Load(), bes[2].calls.Load()}
	for deadline := time.Now().Add(20 * time.Second); bes[0].calls.Load()+bes[2].calls.Load() < after[0]+after[1]+300; {
		if time.Now().After(deadline) {
			t.Fatal("the other backends get no calls after the kill")
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	bes[1].mu.Lock()
	late := bes[1].late
	bes[1].mu.Unlock()
	if f := failures.Load(); f > int64(max(inflight, conns)+late) {
		var first error
		if p := firstErr.Load(); p != nil {
			first = *p
		}
		t.Errorf("%d calls failed after the kill; the backend had %d in flight on %d connections (and %d reached it as it died); first: %v",
			f, inflight, conns, late, first)
	}
	// Once ejected, it is left alone, and the rest still spread evenly.
	if errs := callMany(ctx, org, 300, 6); len(errs) > 0 {
		t.Fatalf("after the kill: %d calls failed, first: %v", len(errs), errs[0])
	}
	wantEvenSpread(t, []int64{bes[0].calls.Load() - after[0], bes[2].calls.Load() - after[1]})
	t.Logf("in flight at the kill %d on %d connections, late %d, failed %d", inflight, conns, late, failures.Load())
}

// A backend address that refuses connections from the start costs no call.
func TestUpstreamRefusedConnectionGoesToAnotherBackend(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	live := startCountingBackend(t)
	deadAddr := testkit.DeadAddr(t)
	cfg := testkit.EdgeConfig(t, live.url, iss.URL())
	cfg.Upstream.URLs = []string{"http://" + deadAddr, live.url}
	e := testkit.StartEdge(t, cfg)
	token := testkit.Token(t, iss.URL(), "enterprise-refused")
	for _, p := range []testkit.Protocol{testkit.HTTPJSON, testkit.GRPC} {
		errs := callMany(ctxT(t), testkit.NewClients(e.URL, p, token).Org, 50, 4)
		if len(errs) > 0 {
			t.Errorf("%s: %d of 50 calls failed, first: %v", p, len(errs), errs[0])
		}
	}
	if got := live.calls.Load(); got != 100 {
		t.Errorf("the live backend answered %d calls, want 100", got)
	}
}
