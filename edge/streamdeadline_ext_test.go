package edge_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestWatchStreamPastItsDeadlineEndsDeadlineExceeded: a WatchEnvironment
// stream whose deadline (grpc-timeout, connect-timeout-ms) passes while the
// environment is still provisioning ends with deadline_exceeded in the
// caller's protocol, not as a finished watch, and the edge counts it as
// deadline_exceeded. The connect-go clients send the timeout on the wire
// and keep no timer of their own, as curl does: what they report is what
// the stream ended with. grpc-go keeps its own timer; the server's end
// usually arrives first.
func TestWatchStreamPastItsDeadlineEndsDeadlineExceeded(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour}, nil)
	const who = "pro-watchdeadline"
	id := environmentToWatch(t, testkit.NewClients(s.edge.URL, testkit.ConnectProto, token(who)))
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	before := m.Sum("edge_requests_total", "method", "WatchEnvironment", "code", "deadline_exceeded")
	byClient := m.Sum("edge_deadline_exceeded_total", "origin", "client")
	const timeout = 1500 * time.Millisecond
	streams := 0
	for _, p := range testkit.Protocols {
		if !p.Streams() {
			continue
		}
		streams++
		t.Run(string(p), func(t *testing.T) {
			header := http.Header{"Connect-Timeout-Ms": {"1500"}}
			if p == testkit.GRPC || p == testkit.GRPCWeb {
				header = http.Header{"Grpc-Timeout": {"1500m"}}
			}
			c := clientsSending(s.edge.URL, p, token(who), header)
			start := time.Now()
			stream, err := c.Env.WatchEnvironment(ctxT(t), req(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			if !stream.Receive() || stream.Msg().Status != "PROVISIONING" {
				t.Fatalf("first message: %v %v", stream.Msg(), stream.Err())
			}
			if stream.Receive() {
				t.Fatalf("a second message %v while provisioning", stream.Msg())
			}
			if got := connect.CodeOf(stream.Err()); got != connect.CodeDeadlineExceeded {
				t.Fatalf("the stream ended with %v (%v), want deadline_exceeded", got, stream.Err())
			}
			if took := time.Since(start); took < timeout {
				t.Errorf("ended after %v, before its %v deadline", took, timeout)
			}
		})
	}
	// The deadline was the client's choice: not the service's failure.
	testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "each stream counted deadline_exceeded, the client's", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total", "method", "WatchEnvironment", "code", "deadline_exceeded")-before == float64(streams) &&
			m.Sum("edge_deadline_exceeded_total", "origin", "client")-byClient == float64(streams)
	})

	t.Run("grpc-go", func(t *testing.T) {
		conn, err := grpc.NewClient(strings.TrimPrefix(s.edge.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ctx := metadata.NewOutgoingContext(ctxT(t), metadata.Pairs("authorization", "Bearer "+token(who)))
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/svc.v1.EnvironmentService/WatchEnvironment")
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}); err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		msg := new(svcv1.WatchEnvironmentResponse)
		if err := stream.RecvMsg(msg); err != nil {
			t.Fatalf("first message: %v", err)
		}
		err = stream.RecvMsg(msg)
		if err == io.EOF || status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("the stream ended with %v, want DEADLINE_EXCEEDED", err)
		}
	})
}
