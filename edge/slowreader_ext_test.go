package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// smallWindowClients return an HTTP/1.1 and an h2c client whose sockets
// receive into 64 KiB (and the h2c client's streams too, by their flow
// control): a client that stops reading stalls the edge's writes as soon as
// a few of its messages are buffered. With the kernel's
// autotuned buffers (up to tcp_rmem's 32 MiB here) each stalled stream first
// took tens of MiB of copying, which cost the suite seconds of CPU and
// tested nothing more.
func smallWindowClients() (http1, h2c *http.Client) {
	dial := (&net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) }); cerr != nil {
			return cerr
		}
		return err
	}}).DialContext
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{DialContext: dial}},
		&http.Client{Transport: &http.Transport{DialContext: dial, Protocols: &p,
			HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20}}}
}

// startFloodingUpstream is a backend whose every stream sends 16 KiB
// messages as fast as it may, forever; a call with X-Test-Idle gets one
// message and then nothing.
func startFloodingUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	msg := append([]byte{0, 0, 0, 0x40, 0}, make([]byte, 16<<10)...) // an enveloped 16 KiB message
	srv := orgsvc.NewServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for {
			if _, err := w.Write(msg); err != nil || rc.Flush() != nil {
				return
			}
			if r.Header.Get("X-Test-Idle") != "" {
				<-r.Context().Done()
				return
			}
		}
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestClientsThatStopReadingHoldBoundedMemoryAndTheirStreamsEnd: three
// subjects each open 20 streams (the most they may), in Connect over
// HTTP/1.1, gRPC over HTTP/2 and gRPC-Web, against a backend that writes as
// fast as it can, and never read them. While they are held, the edge's heap
// grows by at most half a MiB per stream (docs/edge.md) and its goroutines
// by at most 10 per stream; after requests.stream_write_timeout of stalled
// writes each stream ends, its lease is freed, and the goroutines go.
// A stream whose backend is merely idle is not ended.
func TestClientsThatStopReadingHoldBoundedMemoryAndTheirStreamsEnd(t *testing.T) {
	// Parallel: the heap and goroutines measured are a child edge's, which
	// serves this test alone.
	t.Parallel()
	iss := testkit.SharedIssuer(t)
	up := startFloodingUpstream(t)
	cfg := testkit.EdgeConfig(t, up, iss.URL())
	const stall = 3 * time.Second
	cfg.Requests.StreamWriteTimeout = stall
	api, admin, debug, _ := startChildEdgeDebug(t, cfg)
	metrics := admin + "/metrics"
	baseline := heapOf(t, debug)
	heap0, goroutines0 := float64(baseline.HeapInuse), float64(baseline.Goroutines)

	type way struct {
		subject, contentType string
		client               *http.Client
	}
	http1, h2c := smallWindowClients()
	ways := []way{
		{"enterprise-slow-connect", "application/connect+proto", http1},
		{"enterprise-slow-grpc", "application/grpc", h2c},
		{"enterprise-slow-grpcweb", "application/grpc-web+proto", http1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tokens := map[string]string{} // a subject's 20 streams need one token, not 20
	open := func(w way, idle bool) *http.Response {
		t.Helper()
		if tokens[w.subject] == "" {
			tokens[w.subject] = testkit.Token(t, iss.URL(), w.subject)
		}
		body := []byte{0, 0, 0, 0, 0} // an empty WatchEnvironmentRequest; the backend does not read it
		r, _ := http.NewRequestWithContext(ctx, "POST", api+"/svc.v1.EnvironmentService/WatchEnvironment", bytes.NewReader(body))
		r.Header.Set("Content-Type", w.contentType)
		r.Header.Set("Authorization", "Bearer "+tokens[w.subject])
		if idle {
			r.Header.Set("X-Test-Idle", "1")
		}
		res, err := w.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Grpc-Status") != "" {
			t.Fatalf("%s: HTTP %d grpc-status %q", w.subject, res.StatusCode, res.Header.Get("Grpc-Status"))
		}
		return res // never read
	}
	idleWay := way{"enterprise-slow-idle", "application/connect+proto", http1}
	idle := open(idleWay, true)
	defer idle.Body.Close()
	for _, w := range ways {
		for range 20 {
			res := open(w, false)
			defer res.Body.Close()
		}
	}
	opened := time.Now()
	const streams = 60
	var maxHeap, maxGoroutines float64
	for {
		h := heapOf(t, debug)
		maxHeap = max(maxHeap, float64(h.HeapInuse))
		maxGoroutines = max(maxGoroutines, float64(h.Goroutines))
		m := testkit.Scrape(t, metrics)
		if m.Sum("edge_open_streams") <= 1 { // the idle one
			break
		}
		if time.Since(opened) > stall+30*time.Second {
			t.Fatalf("streams of clients that stopped reading still open %v after the last opened (stream_write_timeout %v): %v",
				time.Since(opened), stall, m.Sum("edge_open_streams"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ended := time.Since(opened); ended < stall {
		t.Errorf("the stalled streams ended %v after they opened, before the %v write timeout", ended, stall)
	}
	const perStream = 512 << 10
	if grown := maxHeap - heap0; grown > streams*perStream {
		t.Errorf("the edge's heap grew by %.1f MiB with %d stalled streams, more than %d KiB each", grown/(1<<20), streams, perStream>>10)
	}
	if grown := maxGoroutines - goroutines0; grown > streams*10 {
		t.Errorf("the edge's goroutines grew by %v with %d stalled streams, more than 10 each", grown, streams)
	}
	t.Logf("%d stalled streams: heap %+.1f MiB, goroutines %+v at most", streams, (maxHeap-heap0)/(1<<20), maxGoroutines-goroutines0)

	// The idle stream lives on, and each stalled subject may open streams
	// again: its leases were freed.
	m := testkit.Scrape(t, metrics)
	if m.Sum("edge_open_streams") != 1 {
		t.Errorf("open streams %v, want the idle one; the idle stream ended with: %s", m.Sum("edge_open_streams"), howItEnded(idle))
	}
	for _, w := range ways {
		res := open(w, true)
		res.Body.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := float64(heapOf(t, debug).Goroutines)
		if g <= goroutines0+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %v long after the stalled streams ended, %v before", g, goroutines0)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heapOf asks a child edge's debug listener for its live heap.
func heapOf(t *testing.T, debug string) childHeap {
	t.Helper()
	res, err := testkit.HTTP1Client.Get(debug)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var h childHeap
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// howItEnded reads what is left of a stream the edge ended: its last bytes
// (a Connect end-of-stream message carries the error) and the read's error.
func howItEnded(res *http.Response) string {
	type end struct {
		tail []byte
		err  error
	}
	done := make(chan end, 1)
	go func() {
		b, err := io.ReadAll(res.Body)
		if len(b) > 300 {
			b = b[len(b)-300:]
		}
		done <- end{b, err}
	}()
	select {
	case e := <-done:
		return fmt.Sprintf("last bytes %q, read error %v", e.tail, e.err)
	case <-time.After(5 * time.Second):
		return "(still open after all: nothing read for 5 s)"
	}
}
