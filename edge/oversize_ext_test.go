package edge_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// countingUpstream reads every request body to its end, counts what
// arrived, and answers an empty Connect proto message.
type countingUpstream struct {
	URL   string
	mu    sync.Mutex
	most  int64 // the largest body received, in bytes
	whole int   // bodies received to their end
}

func startCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.most = max(u.most, n)
		if err == nil {
			u.whole++
		}
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/proto")
		w.WriteHeader(http.StatusOK)
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u.URL = "http://" + ln.Addr().String()
	return u
}

func (u *countingUpstream) received() (most int64, whole int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.most, u.whole
}

// Bodies that do not say how long they are (chunked HTTP/1.1, HTTP/2
// without content-length, streams whose messages add up) get
// REQUEST_TOO_LARGE in the caller's protocol at the first byte past
// requests.max_body_bytes, and the backend never gets more than the bound,
// nor a whole request.
func TestOversizedBodiesWithoutContentLengthAreRefusedAndNotForwarded(t *testing.T) {
	t.Parallel()
	const bound = 4 << 10
	iss := testkit.SharedIssuer(t)
	up := startCountingUpstream(t)
	cfg := testkit.EdgeConfig(t, up.URL, iss.URL())
	cfg.Requests.MaxBodyBytes = bound
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "pro-oversize")
	big := &svcv1.CreateProjectRequest{OrganizationId: "org_x", Name: "p", Description: strings.Repeat("x", 8<<10)}
	half := &svcv1.WatchEnvironmentRequest{EnvironmentId: strings.Repeat("e", 3<<10)} // two add up past the bound
	twoMessages := func(frame func([]byte) []byte) []byte {
		one := frame(protoBody(half))
		return append(append([]byte{}, one...), one...)
	}
	cases := []struct {
		tr        transport
		procedure string
		body      []byte
	}{}
	for _, tr := range unaryTransports {
		cases = append(cases, struct {
			tr        transport
			procedure string
			body      []byte
		}{tr, "/svc.v1.OrganizationService/CreateProject", tr.encode(big)})
	}
	for _, tr := range []transport{
		{"http1-connect-stream", testkit.HTTP1Client, "application/connect+proto", http.Header{"Connect-Protocol-Version": {"1"}}, nil},
		{"http1-grpc-web-stream", testkit.HTTP1Client, "application/grpc-web+proto", nil, nil},
		{"h2-grpc-stream", testkit.H2CClient, "application/grpc", http.Header{"Te": {"trailers"}}, nil},
	} {
		cases = append(cases, struct {
			tr        transport
			procedure string
			body      []byte
		}{tr, "/svc.v1.EnvironmentService/WatchEnvironment", twoMessages(testkit.Envelope)})
	}
	for _, c := range cases {
		t.Run(c.tr.name, func(t *testing.T) {
			got := rawCall(t, c.tr, e.URL+c.procedure, http.Header{"Authorization": {"Bearer " + tok}}, c.body, testkit.Unsized)
			if got.Code != "resource_exhausted" || got.Reason != "REQUEST_TOO_LARGE" {
				t.Fatalf("a %d-byte body without Content-Length got %v, want resource_exhausted REQUEST_TOO_LARGE", len(c.body), got)
			}
		})
	}
	if most, whole := up.received(); most > bound || whole != 0 {
		t.Fatalf("the backend received up to %d bytes (bound %d) and %d whole bodies, want none", most, bound, whole)
	}
}

// A Content-Length that lies low is not a way past the bound: HTTP/1.1
// reads only the declared bytes as the body, and what follows is no
// request (400, connection closed). The backend never sees more than was
// declared.
func TestALyingContentLengthForwardsNoMoreThanDeclared(t *testing.T) {
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startCountingUpstream(t)
	cfg := testkit.EdgeConfig(t, up.URL, iss.URL())
	cfg.Requests.MaxBodyBytes = config.KiB * 4
	e := testkit.StartEdge(t, cfg)
	tok := testkit.Token(t, iss.URL(), "pro-lying")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	body := `{"organizationId":"org_x","name":"p","description":"` + strings.Repeat("x", 16<<10) + `"}`
	const declared = 20
	fmt.Fprintf(conn, "POST /svc.v1.OrganizationService/CreateProject HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tok, declared, body)
	br := bufio.NewReader(conn)
	var statuses []int
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			break // the edge closed the connection
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		statuses = append(statuses, res.StatusCode)
	}
	if len(statuses) == 0 || statuses[len(statuses)-1] != http.StatusBadRequest {
		t.Fatalf("answers %v, want the declared request's and then 400 for the bytes past it", statuses)
	}
	if most, _ := up.received(); most > declared {
		t.Fatalf("the backend received %d bytes, more than the %d declared", most, declared)
	}
}
