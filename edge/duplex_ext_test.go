package edge_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// readEnvelope reads one Connect streaming message.
func readEnvelope(r io.Reader) (flags byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, binary.BigEndian.Uint32(head[1:]))
	_, err = io.ReadFull(r, payload)
	return head[0], payload, err
}

// TestHTTP1StreamAnsweredBeforeItsBodyIsReadStaysWhole: a stream over
// HTTP/1.1 whose client sends its message a moment after the headers, and
// whose backend answers before it reads that message. The edge reads the
// request whole before it forwards it, so the backend gets the message
// and the answer flows. (The race this prevents, net/http discarding and
// closing an unread request body when the answer's headers go out, depends
// on goroutine order and is not forced here; the slow-reader test's idle
// stream met it under load.)
func TestHTTP1StreamAnsweredBeforeItsBodyIsReadStaysWhole(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_, _ = w.Write(testkit.Envelope([]byte("first")))
		_ = rc.Flush()
		_, msg, err := readEnvelope(r.Body) // only now
		if err != nil {
			return
		}
		_, _ = w.Write(testkit.Envelope(append([]byte("echo:"), msg...)))
		end := testkit.Envelope([]byte("{}"))
		end[0] = 2 // end of stream
		_, _ = w.Write(end)
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	iss := testkit.SharedIssuer(t)
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, "http://"+ln.Addr().String(), iss.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, send := io.Pipe()
	context.AfterFunc(ctx, func() { _ = send.CloseWithError(ctx.Err()) }) // a stuck call fails, not hangs
	r, _ := http.NewRequestWithContext(ctx, "POST", e.URL+"/svc.v1.EnvironmentService/WatchEnvironment", body)
	r.Header.Set("Content-Type", "application/connect+proto")
	r.Header.Set("Authorization", "Bearer "+testkit.Token(t, iss.URL(), "enterprise-duplex"))
	// The client's message follows its headers a moment later (a slow
	// client), complete before the client reads anything.
	time.AfterFunc(100*time.Millisecond, func() {
		_, _ = send.Write(testkit.Envelope([]byte("hello")))
		_ = send.Close()
	})
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatalf("the stream's answer never began: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", res.StatusCode)
	}
	if _, msg, err := readEnvelope(res.Body); err != nil || string(msg) != "first" {
		t.Fatalf("first message %q, %v", msg, err)
	}
	if _, msg, err := readEnvelope(res.Body); err != nil || string(msg) != "echo:hello" {
		t.Fatalf("second message %q, %v; want the backend's echo of the client's message", msg, err)
	}
	if flags, _, err := readEnvelope(res.Body); err != nil || flags != 2 {
		t.Fatalf("end of stream: flags %d, %v", flags, err)
	}
	if rest, _ := io.ReadAll(res.Body); len(rest) != 0 {
		t.Errorf("%d bytes after the end of the stream", len(rest))
	}
}
