package edge_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// startSlowAnswerBackend serves h, but holds back the answer of every call
// whose path ends in suffix for up to a second after the operation ran (or
// until the edge gives up the call), and tells ran when it has run: a
// backend whose answer is on its way when the caller leaves.
func startSlowAnswerBackend(t *testing.T, h http.Handler, suffix string, ran chan<- struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, suffix) {
			h.ServeHTTP(w, r)
			return
		}
		// Without Flush, the answer stays in the server's buffer until
		// this handler returns.
		h.ServeHTTP(struct{ http.ResponseWriter }{w}, r)
		ran <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// A caller that hangs up after the backend ran its keyed call must not free
// the key: the edge keeps the answer, and the retry gets the replay instead
// of creating the organization a second time. Over HTTP/1.1 (Connect, plain
// JSON) and HTTP/2 (gRPC), each with a real client that cancels.
func TestACallerThatLeavesAfterTheBackendRanGetsTheReplayOnRetry(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	ran := make(chan struct{}, 16)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, startSlowAnswerBackend(t, be.Service.Handler(), "/CreateOrganization", ran), iss.URL()))
	for _, p := range []testkit.Protocol{testkit.ConnectJSON, testkit.HTTPJSON, testkit.GRPC} {
		t.Run(string(p), func(t *testing.T) {
			c := testkit.NewClients(e.URL, p, testkit.Token(t, iss.URL(), "pro-vanish-"+string(p)))
			create := func(ctx context.Context) (*connect.Response[svcv1.Organization], error) {
				r := req(&svcv1.CreateOrganizationRequest{Name: "vanish-" + string(p), BillingEmail: "a@b.example"})
				r.Header().Set("Idempotency-Key", "vanish-1")
				return c.Org.CreateOrganization(ctx, r)
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			first := make(chan error, 1)
			go func() {
				_, err := create(ctx)
				first <- err
			}()
			select {
			case <-ran:
			case err := <-first:
				t.Fatalf("the first call ended before the backend ran it: %v", err)
			}
			cancel() // the answer is on its way; the caller hangs up
			if err := <-first; err == nil {
				t.Fatal("the cancelled call got its answer; the test did not cancel in time")
			}

			var (
				res *connect.Response[svcv1.Organization]
				err error
			)
			for deadline := time.Now().Add(20 * time.Second); ; {
				res, err = create(ctxT(t))
				if connect.CodeOf(err) != connect.CodeAborted || time.Now().After(deadline) {
					break // aborted: the first call is still in flight at the edge
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("the retry got %v, want the replay of the first call's answer", err)
			}
			if res.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the retry ran the call again (Idempotent-Replayed %q)", res.Header().Get("Idempotent-Replayed"))
			}
			list, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
			if err != nil || len(list.Msg.Organizations) != 1 || list.Msg.Organizations[0].Id != res.Msg.Id {
				t.Fatalf("the backend holds %v (%v), want the one organization the replay names, %s", list, err, res.Msg.Id)
			}
		})
	}
}
