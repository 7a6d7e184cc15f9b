package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/proxy"
)

// Each message of a stream reaches the client before the backend sends the
// next, whatever its size against the buffers the proxy copies through:
// nothing read is held back behind a read that waits.
func TestEachStreamMessageReachesTheClientBeforeTheNextIsSent(t *testing.T) {
	sizes := []int{1, 255, 256, 257, 512, 2047, 2048, 2049, 2304, 5000, 64 << 10}
	received := make(chan struct{})
	// Over cleartext HTTP/2, as the edge forwards streams.
	up := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i, n := range sizes {
			_, _ = w.Write(bytes.Repeat([]byte{byte('a' + i)}, n))
			w.(http.Flusher).Flush()
			select {
			case <-received: // the client has it all: the next
			case <-r.Context().Done():
				return
			}
		}
	}))
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	always := func(*http.Request) bool { return true }
	pool := proxy.NewPool(proxy.PoolOptions{Upstreams: []*url.URL{u}, DialTimeout: 2 * time.Second, HTTP2: always})
	defer pool.Close()
	p := proxy.New(proxy.Options{Upstream: u, Transport: pool, Stream: always})
	edge := httptest.NewServer(p)
	defer edge.Close()

	// A bound on the whole test, so that a message held back fails it
	// rather than hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", edge.URL+"/svc.v1.EnvironmentService/WatchEnvironment", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for i, n := range sizes {
		msg := make([]byte, n)
		if _, err := io.ReadFull(res.Body, msg); err != nil {
			t.Fatalf("message %d (%d bytes) did not reach the client before the next was sent: %v", i, n, err)
		}
		if want := bytes.Repeat([]byte{byte('a' + i)}, n); !bytes.Equal(msg, want) {
			t.Fatalf("message %d (%d bytes) came altered", i, n)
		}
		received <- struct{}{}
	}
	if rest, err := io.ReadAll(res.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the last message: %d bytes more, %v; want the end", len(rest), err)
	}
}

// h2cServer starts a backend that speaks HTTP/1.1 and cleartext HTTP/2,
// closed when the test ends.
func h2cServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	up := httptest.NewUnstartedServer(h)
	up.Config.Protocols = new(http.Protocols)
	up.Config.Protocols.SetHTTP1(true)
	up.Config.Protocols.SetUnencryptedHTTP2(true)
	up.Start()
	t.Cleanup(up.Close)
	return up
}
