package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/proxy"
)

// unaryPool is a pool on one backend, whose calls all go over HTTP/1.1.
func unaryPool(t *testing.T, backend string) *proxy.Pool {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	p := proxy.NewPool(proxy.PoolOptions{Upstreams: []*url.URL{u}, DialTimeout: 2 * time.Second})
	t.Cleanup(p.Close)
	return p
}

func post(t *testing.T, ctx context.Context, backend, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, "POST", backend+"/svc.v1.OrganizationService/GetOrganization?x=1", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

// A unary call reaches the backend as it was sent (method, path and query,
// Host, headers, body), without hop-by-hop headers; its answer comes back
// whole, with the backend's status and headers in net/http's canonical
// form, even when the backend writes them in lower case.
func TestHTTP1CallsAndAnswersPassWhole(t *testing.T) {
	type seen struct {
		method, uri, host, body string
		header                  http.Header
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Clone()}
		w.Header()["x-lower"] = []string{"v"} // as a non-Go backend may write it
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"organization":{}}`)
	}))
	defer up.Close()
	r := post(t, context.Background(), up.URL, `{"id":"org_1"}`)
	r.Host = "api.example.com"
	r.Header.Set("X-Tenant", "tenant-a")
	r.Header.Add("X-Many", "1")
	r.Header.Add("X-Many", "2")
	r.Header.Set("Te", "trailers")
	r.Header.Set("Upgrade", "websocket")
	res, err := unaryPool(t, up.URL).RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusTeapot || string(body) != `{"organization":{}}` || res.ContentLength != int64(len(body)) {
		t.Errorf("answer %d %q (length %d), want 418 and the backend's body", res.StatusCode, body, res.ContentLength)
	}
	if res.Header.Get("X-Lower") != "v" || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("answer headers %v, want X-Lower and Content-Type", res.Header)
	}
	s := <-got
	if s.method != "POST" || s.uri != "/svc.v1.OrganizationService/GetOrganization?x=1" || s.host != "api.example.com" || s.body != `{"id":"org_1"}` {
		t.Errorf("backend got %s %s Host %s body %q", s.method, s.uri, s.host, s.body)
	}
	if s.header.Get("X-Tenant") != "tenant-a" || strings.Join(s.header.Values("X-Many"), ",") != "1,2" {
		t.Errorf("backend got headers %v, want X-Tenant and both X-Many", s.header)
	}
	if s.header.Get("Te") != "" || s.header.Get("Upgrade") != "" || s.header.Get("User-Agent") != "" {
		t.Errorf("backend got hop-by-hop or added headers: %v", s.header)
	}
}

// A body larger than what the pool reads first streams to the backend,
// with or without a length.
func TestHTTP1LargeAndChunkedBodiesStream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, r.TransferEncoding)
	}))
	defer up.Close()
	p := unaryPool(t, up.URL)
	big := strings.Repeat("x", 200<<10)
	for _, c := range []struct {
		name   string
		length int64
		want   string
	}{{"with a length", int64(len(big)), fmt.Sprintf("%d []", len(big))}, {"chunked", -1, fmt.Sprintf("%d [chunked]", len(big))}} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, context.Background(), up.URL, "")
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(big)), c.length
			res, err := p.RoundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if string(b) != c.want {
				t.Errorf("backend read %q, want %q", b, c.want)
			}
		})
	}
}

// What the backend reads is framed by the proxy alone: a value holding a
// line break (the edge sets some headers itself) cannot add a header, cookies
// split over several fields arrive as one Cookie line, a POST without a body
// says Content-Length: 0 and a GET says nothing of a body.
func TestHTTP1CallsAreFramedByTheProxyAlone(t *testing.T) {
	got := make(chan *http.Request, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		_, _ = io.WriteString(w, "{}")
	}))
	defer up.Close()
	p := unaryPool(t, up.URL)

	r := post(t, context.Background(), up.URL, `{"id":"org_1"}`)
	r.Header["X-Subject"] = []string{"alice\r\nX-Injected: 1"}
	r.Header["Cookie"] = []string{"a=1", "b=2"}
	if _, err := answer(t, p, r); err != nil {
		t.Fatal(err)
	}
	in := <-got
	if v := in.Header.Get("X-Subject"); v != "alice  X-Injected: 1" || in.Header.Get("X-Injected") != "" {
		t.Errorf("backend got X-Subject %q and X-Injected %q, want the line break as spaces and no X-Injected", v, in.Header.Get("X-Injected"))
	}
	if c := in.Header.Values("Cookie"); len(c) != 1 || c[0] != "a=1; b=2" {
		t.Errorf("backend got Cookie %q, want one line a=1; b=2", c)
	}

	for _, c := range []struct{ method, length string }{{"POST", "0"}, {"GET", ""}} {
		r, err := http.NewRequest(c.method, up.URL+"/svc.v1.OrganizationService/ListEnvironments", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := answer(t, p, r); err != nil {
			t.Fatal(err)
		}
		if in := <-got; in.Header.Get("Content-Length") != c.length || len(in.TransferEncoding) != 0 {
			t.Errorf("a %s without a body reached the backend with Content-Length %q, Transfer-Encoding %v; want %q and none",
				c.method, in.Header.Get("Content-Length"), in.TransferEncoding, c.length)
		}
	}
}

// A streamed body that ends before its Content-Length fails the call: the
// backend never takes the part it got for a whole call.
func TestHTTP1BodyShorterThanItsLengthFailsTheCall(t *testing.T) {
	var whole atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			whole.Add(1)
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer up.Close()
	r := post(t, context.Background(), up.URL, "")
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(strings.Repeat("x", 100<<10))), 200<<10
	if _, err := answer(t, unaryPool(t, up.URL), r); err == nil {
		t.Fatal("a body 100 KiB short of its length was forwarded without an error")
	}
	up.Close() // waits for the backend's handler
	if n := whole.Load(); n != 0 {
		t.Errorf("the backend read %d whole calls, want none", n)
	}
}

// closingBackend answers each connection's first call and closes it,
// without saying so (no Connection: close), as a backend does when its idle
// timeout strikes just after an answer. It counts the calls it read and
// tells each close on closed.
func closingBackend(t *testing.T) (url string, calls *atomic.Int32, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	calls = new(atomic.Int32)
	ch := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err == nil {
					_, _ = io.Copy(io.Discard, req.Body)
					n := calls.Add(1)
					_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d", n)
				}
				_ = c.Close()
				ch <- struct{}{}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), calls, ch
}

func answer(t *testing.T, p *proxy.Pool, r *http.Request) (string, error) {
	t.Helper()
	res, err := p.RoundTrip(r)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// A pooled connection that the backend closed while it was idle is
// noticed before use: the call goes out on a new connection.
func TestHTTP1IdleConnectionTheBackendClosedIsNotUsed(t *testing.T) {
	defer proxy.SetIdleCheckAfter(0)()
	backend, _, closed := closingBackend(t)
	p := unaryPool(t, backend)
	for i := 1; i <= 3; i++ {
		got, err := answer(t, p, post(t, context.Background(), backend, `{"id":"org_1"}`))
		if err != nil || got != fmt.Sprint(i) {
			t.Fatalf("call %d: %q, %v; want call %d answered", i, got, err, i)
		}
		<-closed // the backend has closed the connection it answered on
	}
}

// A connection the backend closes just before a call is reused (it was
// idle too briefly to be checked): a read-only call (PoolOptions.ReadOnly)
// is sent again on a new connection; any other fails rather than risk being
// acted on twice, an Idempotency-Key notwithstanding (the backend does not
// deduplicate).
func TestHTTP1CallOnAConnectionClosedJustBeforeIsRepeatedOnlyIfReadOnly(t *testing.T) {
	defer proxy.SetIdleCheckAfter(time.Hour)()
	backend, calls, closed := closingBackend(t)
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	p := proxy.NewPool(proxy.PoolOptions{Upstreams: []*url.URL{u}, DialTimeout: 2 * time.Second,
		ReadOnly: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/GetOrganization") }})
	t.Cleanup(p.Close)
	if got, err := answer(t, p, post(t, context.Background(), backend, `{}`)); err != nil || got != "1" {
		t.Fatalf("first call: %q, %v", got, err)
	}
	<-closed
	if got, err := answer(t, p, post(t, context.Background(), backend, `{}`)); err != nil || got != "2" {
		t.Fatalf("read-only call on a closed connection: %q, %v; want it sent again and answered", got, err)
	}
	<-closed
	keyed, err := http.NewRequest("POST", backend+"/svc.v1.OrganizationService/CreateOrganization", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	keyed.Header.Set("Idempotency-Key", "k-1")
	if got, err := answer(t, p, keyed); err == nil {
		t.Fatalf("keyed call on a closed connection answered %q; want an error, not a second send", got)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("backend read %d calls, want 2", n)
	}
}

// A call whose context ends (its deadline, or its client leaving) ends at
// once, with the context's error, and the backend sees its request end.
func TestHTTP1CallEndsWithItsContext(t *testing.T) {
	ended := make(chan error, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // (net/http notices a client gone once the body is in)
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(time.Minute):
			ended <- errors.New("the backend's call was not cancelled")
		}
	}))
	defer up.Close()
	p := unaryPool(t, up.URL)
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			_, err := p.RoundTrip(post(t, ctx, up.URL, `{}`))
			if !errors.Is(err, c.want) {
				t.Errorf("RoundTrip: %v, want %v", err, c.want)
			}
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Errorf("backend: %v, want its request cancelled", err)
			}
		})
	}
}

// An answer over proxy.MaxUnaryAnswer fails the call rather than being
// held in memory.
func TestHTTP1AnswerOverTheBoundFails(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, io.LimitReader(zeros{}, proxy.MaxUnaryAnswer+1))
	}))
	defer up.Close()
	res, err := unaryPool(t, up.URL).RoundTrip(post(t, context.Background(), up.URL, `{}`))
	if err == nil {
		_ = res.Body.Close()
		t.Fatal("an answer over the bound was passed on")
	}
	if !strings.Contains(err.Error(), "answer is over") {
		t.Errorf("error %q, want one naming the answer's size", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A unary call the proxy forwards whole carries the client's headers less
// the hop-by-hop ones (and those its Connection header names), the edge's
// internal ones and the client's X-Forwarded-*, which the proxy sets from
// what it saw; the answer loses its hop-by-hop headers too.
func TestWholeAnswerCallsForwardOnlyEndToEndHeaders(t *testing.T) {
	got := make(chan *http.Request, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Kept", "1")
		_, _ = io.WriteString(w, "{}")
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	p := proxy.New(proxy.Options{Upstream: u})
	r := hostileCall("http://api.example.com/svc.v1.OrganizationService/GetOrganization?a=1;b=2&c=3", "application/json")
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, r)
	in := <-got
	for _, h := range []string{"Connection", "X-Secret", "Keep-Alive", "X-Edge-Subject", "Forwarded"} {
		if v := in.Header.Get(h); v != "" {
			t.Errorf("backend got %s: %q", h, v)
		}
	}
	if in.Header.Get("X-Forwarded-For") != "192.0.2.7" || in.Header.Get("X-Forwarded-Host") != "api.example.com" ||
		in.Header.Get("X-Forwarded-Proto") != "http" || in.Header.Get("X-Tenant") != "tenant-a" {
		t.Errorf("backend got %v", in.Header)
	}
	if in.URL.RawQuery != "c=3" {
		t.Errorf("backend got query %q, want the parameters that parse (c=3)", in.URL.RawQuery)
	}
	if rec.Code != http.StatusOK || rec.Body.String() != "{}" || rec.Header().Get("X-Kept") != "1" {
		t.Errorf("client got %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	for _, h := range []string{"Connection", "X-Hop", "Keep-Alive"} {
		if v := rec.Header().Get(h); v != "" {
			t.Errorf("client got the answer's %s: %q", h, v)
		}
	}
}

// A stream's messages larger than its copy buffer reach the client whole
// and in order.
func TestStreamMessagesLargerThanTheStreamBufferPassWhole(t *testing.T) {
	msgs := []string{strings.Repeat("a", 100<<10), "b", strings.Repeat("c", 3000)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range msgs {
			_, _ = io.WriteString(w, m)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := proxy.New(proxy.Options{Upstream: u, Transport: unaryPool(t, up.URL), Stream: func(*http.Request) bool { return true }})
	edge := httptest.NewServer(p)
	defer edge.Close()

	res, err := http.Get(edge.URL + "/svc.v1.EnvironmentService/WatchEnvironment")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(msgs, ""); string(got) != want {
		t.Errorf("got %d bytes, want %d: the messages did not pass whole and in order", len(got), len(want))
	}
}
