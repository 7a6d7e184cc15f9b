package edge_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// transport is one way of sending a raw call: an HTTP version, a protocol
// and how a message is written.
type transport struct {
	name   string
	hc     *http.Client
	ct     string
	header http.Header
	encode func(proto.Message) []byte
}

func protoBody(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func jsonBody(m proto.Message) []byte {
	b, err := protojson.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

var unaryTransports = []transport{
	{"http1-connect-json", testkit.HTTP1Client, "application/json", http.Header{"Connect-Protocol-Version": {"1"}}, jsonBody},
	{"http1-plain-json", testkit.HTTP1Client, "application/json", nil, jsonBody},
	{"http1-grpc-web", testkit.HTTP1Client, "application/grpc-web+proto", nil, func(m proto.Message) []byte { return testkit.Envelope(protoBody(m)) }},
	{"h2-connect-proto", testkit.H2CClient, "application/proto", http.Header{"Connect-Protocol-Version": {"1"}}, protoBody},
	{"h2-grpc", testkit.H2CClient, "application/grpc", http.Header{"Te": {"trailers"}}, func(m proto.Message) []byte { return testkit.Envelope(protoBody(m)) }},
}

// rawCall posts body to url, sent as how says, and reads the outcome. A
// call the edge does not answer fails after 10 s.
func rawCall(t *testing.T, tr transport, url string, header http.Header, body []byte, how testkit.Sending) testkit.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := tr.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range header {
		h[k] = v
	}
	o, err := testkit.RawCall(ctx, tr.hc, url, tr.ct, h, body, how)
	if err != nil {
		t.Fatalf("%s: %v", tr.name, err)
	}
	return o
}

// A client that sends part of a unary body and then nothing gets
// deadline_exceeded (REQUEST_BODY_TIMEOUT) in its protocol once
// requests.body_timeout has passed, over HTTP/1.1 and HTTP/2; the quota it
// reserved is given back, and its Idempotency-Key was never taken: the same
// key with a whole body runs.
func TestASlowUnaryBodyIsDeadlineExceededAndReleasesWhatItReserved(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Requests.BodyTimeout = 300 * time.Millisecond // the client below never sends the rest
	})
	tok := token("free-slow-body")
	create := &svcv1.CreateEnvironmentRequest{ProjectId: "prj_missing", Name: "slow", BlueprintId: "go-api"}
	for _, tr := range unaryTransports {
		t.Run(tr.name, func(t *testing.T) {
			url := s.edge.URL + "/svc.v1.EnvironmentService/CreateEnvironment"
			header := http.Header{"Authorization": {"Bearer " + tok}, "Idempotency-Key": {"slow-" + tr.name}}
			whole := tr.encode(create)
			got := rawCall(t, tr, url, header, whole[:len(whole)/2], testkit.Stalled)
			if got.Code != "deadline_exceeded" || got.Reason != "REQUEST_BODY_TIMEOUT" {
				t.Fatalf("a stalled body got %v, want deadline_exceeded REQUEST_BODY_TIMEOUT", got)
			}
			// The key is free: the whole request runs, and the backend says
			// the project does not exist.
			if got := rawCall(t, tr, url, header, whole, testkit.Sized); got.Code != "not_found" {
				t.Fatalf("the same key with the whole body got %v, want the backend's not_found", got)
			}
		})
	}
	testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every reservation rolled back", func(m testkit.Samples) bool {
		count := func(o string) float64 { return m.Sum("edge_quota_reservations_total", "outcome", o) }
		return count("reserved") == float64(2*len(unaryTransports)) && count("rolled_back") == count("reserved")
	})
}

// A stream whose request message does not arrive within
// requests.stream_message_timeout ends with deadline_exceeded in its
// protocol, and its concurrent-stream lease is given back.
func TestAStalledStreamMessageIsDeadlineExceededAndFreesTheLease(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Requests.StreamMessageTimeout = 300 * time.Millisecond
	})
	tok := token("pro-slow-stream")
	watch := testkit.Envelope(protoBody(&svcv1.WatchEnvironmentRequest{EnvironmentId: "env_missing"}))
	for _, tr := range []transport{
		{"http1-connect-proto", testkit.HTTP1Client, "application/connect+proto", http.Header{"Connect-Protocol-Version": {"1"}}, nil},
		{"http1-grpc-web", testkit.HTTP1Client, "application/grpc-web+proto", nil, nil},
		{"h2-grpc", testkit.H2CClient, "application/grpc", http.Header{"Te": {"trailers"}}, nil},
	} {
		t.Run(tr.name, func(t *testing.T) {
			url := s.edge.URL + "/svc.v1.EnvironmentService/WatchEnvironment"
			header := http.Header{"Authorization": {"Bearer " + tok}}
			msg := watch
			for _, part := range [][]byte{nil, msg[:3], msg[:len(msg)-1]} {
				got := rawCall(t, tr, url, header, part, testkit.Stalled)
				if got.Code != "deadline_exceeded" || got.Reason != "REQUEST_BODY_TIMEOUT" {
					t.Fatalf("a stream that sent %d of its message's %d bytes got %v, want deadline_exceeded REQUEST_BODY_TIMEOUT", len(part), len(msg), got)
				}
			}
		})
	}
	testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "no lease held", func(m testkit.Samples) bool {
		return m.Sum("edge_stream_leases_held") == 0 && m.Sum("edge_open_streams") == 0
	})
}
