package edge_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// stuckUpstream is a backend that never answers: it holds every call until
// the edge cancels it, and notes the timeout it was given and whether it was
// cancelled.
type stuckUpstream struct {
	URL       string
	mu        sync.Mutex
	timeouts  []time.Duration // forwarded grpc-timeout or connect-timeout-ms
	cancelled chan struct{}   // one value per call the edge cancelled
}

func startStuckUpstream(t *testing.T) *stuckUpstream {
	t.Helper()
	u := &stuckUpstream{cancelled: make(chan struct{}, 100)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request first, as every backend does (connect-go reads
		// the whole message before calling the method): an HTTP/1.1 server
		// notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.timeouts = append(u.timeouts, forwardedTimeout(r.Header))
		u.mu.Unlock()
		// Read the request, as real backends do: over HTTP/1.1 the server
		// notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			u.cancelled <- struct{}{}
		case <-done:
		}
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { close(done); _ = srv.Close() })
	u.URL = "http://" + ln.Addr().String()
	return u
}

// forwardedTimeout reads the timeout header the backend got (0: none).
func forwardedTimeout(h http.Header) time.Duration {
	if v := h.Get("Connect-Timeout-Ms"); v != "" {
		ms, _ := strconv.Atoi(v)
		return time.Duration(ms) * time.Millisecond
	}
	v := h.Get("Grpc-Timeout")
	if ms, ok := strings.CutSuffix(v, "m"); ok {
		n, _ := strconv.Atoi(ms)
		return time.Duration(n) * time.Millisecond
	}
	return 0
}

// calls returns how many calls the backend has seen.
func (u *stuckUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.timeouts)
}

func (u *stuckUpstream) lastTimeout(t *testing.T) time.Duration {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.timeouts) == 0 {
		t.Fatal("the backend saw no call")
	}
	return u.timeouts[len(u.timeouts)-1]
}

// TestBackendPastTheClientsDeadlineGetsDeadlineExceededFromTheEdge: a
// client sends a 200 ms timeout (and waits far longer itself, so that only
// the edge can end the call); the backend never answers. The edge answers
// deadline_exceeded in the client's protocol at the deadline, cancels the
// backend's call, forwards no more than the time left, and rolls the
// environment reservation back: five timed-out CreateEnvironment calls of a
// free subject (2 concurrent environments) never find a slot taken.
func TestBackendPastTheClientsDeadlineGetsDeadlineExceededFromTheEdge(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startStuckUpstream(t)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, up.URL, iss.URL()))
	tok := testkit.Token(t, iss.URL(), "free-deadline")
	const timeout = 200 * time.Millisecond
	for _, p := range testkit.Protocols {
		t.Run(string(p), func(t *testing.T) {
			header := http.Header{"Connect-Timeout-Ms": {"200"}}
			if p == testkit.GRPC || p == testkit.GRPCWeb {
				header = http.Header{"Grpc-Timeout": {"200m"}}
			}
			c := clientsSending(e.URL, p, tok, header)
			seen := up.calls()
			start := time.Now()
			// The client's own context allows 30 s.
			_, err := c.Env.CreateEnvironment(ctxT(t), req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: "prj_1"}))
			took := time.Since(start)
			wantError(t, err, connect.CodeDeadlineExceeded, "DEADLINE_EXCEEDED", "edge")
			if took < timeout {
				t.Errorf("answered after %v, before the client's %v deadline", took, timeout)
			}
			if up.calls() == seen {
				// A loaded machine may spend the whole 200 ms before
				// forwarding: then the edge must not forward at all.
				t.Logf("the deadline passed before the call left the edge")
				return
			}
			select {
			case <-up.cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the backend's call was not cancelled")
			}
			if got := up.lastTimeout(t); got <= 0 || got > timeout {
				t.Errorf("backend got a timeout of %v, want (0, %v]", got, timeout)
			}
		})
	}
	testkit.ScrapeUntil(t, e.AdminURL+"/metrics", "every reservation rolled back", func(m testkit.Samples) bool {
		count := func(o string) float64 { return m.Sum("edge_quota_reservations_total", "outcome", o) }
		return count("reserved") == float64(len(testkit.Protocols)) && count("rolled_back") == count("reserved") && count("refused") == 0
	})
}

// clientsSending returns clients in protocol p whose every request carries
// header, set on the wire: connect-go sets the timeout headers from the
// context's deadline only, and would also end the call itself.
func clientsSending(baseURL string, p testkit.Protocol, token string, header http.Header) testkit.Clients {
	base := testkit.HTTP1Client
	if p == testkit.GRPC {
		base = testkit.H2CClient
	}
	hc := &http.Client{Transport: headerTransport{base.Transport, header}}
	if p == testkit.HTTPJSON {
		c := &testkit.JSONClient{HTTP: hc, BaseURL: baseURL, Header: http.Header{"Authorization": {"Bearer " + token}}}
		return testkit.Clients{Org: c, Env: c, Blueprint: c, Usage: c}
	}
	return testkit.NewClientsWith(hc, baseURL, p, token)
}

type headerTransport struct {
	next   http.RoundTripper
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = vs
	}
	return h.next.RoundTrip(r)
}

// TestTimeForwardedToTheBackendDeductsTheTimeSpentInTheEdge: with 100 ms
// added to every Redis round trip, the limit step alone spends 100 ms of a
// call's second; the backend gets what is left, at most 900 ms.
func TestTimeForwardedToTheBackendDeductsTheTimeSpentInTheEdge(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startStuckUpstream(t)
	slow := testkit.StartFaultProxy(t, testenv.RedisAddr(t))
	cfg := testkit.EdgeConfig(t, up.URL, iss.URL())
	cfg.Redis.Addr = slow.Addr
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "pro-deduct")
	const delay, timeout = 100 * time.Millisecond, time.Second
	// Warm up without delay: the script loaded, the pool's connections
	// dialled.
	warm := clientsSending(e.URL, testkit.ConnectProto, tok, http.Header{"Connect-Timeout-Ms": {"300"}})
	for range 3 {
		_, _ = warm.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
	}
	slow.Delay(delay)
	for _, p := range []testkit.Protocol{testkit.ConnectProto, testkit.GRPC} {
		t.Run(string(p), func(t *testing.T) {
			header := http.Header{"Connect-Timeout-Ms": {"1000"}}
			if p == testkit.GRPC {
				header = http.Header{"Grpc-Timeout": {"1S"}}
			}
			c := clientsSending(e.URL, p, tok, header)
			_, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
				t.Fatalf("got %v, want deadline_exceeded", err)
			}
			if got := up.lastTimeout(t); got <= 0 || got > timeout-delay {
				t.Errorf("backend got %v of the call's %v after the edge spent at least %v on it", got, timeout, delay)
			}
		})
	}
}
