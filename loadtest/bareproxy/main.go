// Command bareproxy is the baseline for the edge's throughput benchmark
// (docs/benchmarks.md): a bare httputil.ReverseProxy, HTTP/1.1 and
// cleartext HTTP/2 in, cleartext HTTP/2 to the backend, with the same
// transport settings as the edge's proxy step (edge/proxy) and nothing
// else: no classification, authentication, limits, idempotency, logging
// or metrics.
//
//	go run ./loadtest/bareproxy -listen 127.0.0.1:18090 -upstream http://127.0.0.1:8082
//
// -buffer-size copies answers through pooled buffers of that size instead
// of httputil.ReverseProxy's 32 KiB buffer per call (bench/streams.sh: a
// bare proxy's memory per open stream with the edge's 2 KiB stream buffer).
//
// -pprof serves net/http/pprof on a separate address, to profile the
// baseline under the same load as the edge.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // on -pprof only: http.DefaultServeMux
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18090", "`host:port` to serve (HTTP/1.1 and h2c)")
	upstream := flag.String("upstream", "http://127.0.0.1:8082", "backend `URL` (cleartext HTTP/2)")
	h1 := flag.Bool("upstream-http1", false, "speak HTTP/1.1 to the backend instead of h2c")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this `host:port` (off when empty)")
	noGzip := flag.Bool("disable-compression", false, "set http.Transport.DisableCompression (the edge leaves it false, so Go's transport asks the backend for gzip and unzips every answer)")
	bufSize := flag.Int("buffer-size", 0, "copy answers through pooled buffers of this many `bytes` (httputil.ReverseProxy.BufferPool); 0: its own 32 KiB buffer per call, made per call")
	flush := flag.Duration("flush-interval", -1, "httputil.ReverseProxy.FlushInterval: -1 (the edge's) flushes every write, 0 only at the end of an answer with a length")
	flag.Parse()

	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		log.Fatalf("bareproxy: -upstream %q: want http://host:port", *upstream)
	}
	var out http.Protocols
	if *h1 {
		out.SetHTTP1(true)
	} else {
		out.SetUnencryptedHTTP2(true)
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Protocols:           &out,
		DialContext:         dialer.DialContext,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 1024, // matters for -upstream-http1 only
		DisableCompression:  *noGzip,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
	target := *u
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&target)
			pr.SetXForwarded()
		},
		Transport:     transport,
		FlushInterval: *flush, // -1 by default, as the edge: every message at once
		ErrorLog:      log.New(os.Stderr, "bareproxy: ", 0),
	}
	if *bufSize > 0 {
		proxy.BufferPool = newBufferPool(*bufSize)
	}

	var in http.Protocols
	in.SetHTTP1(true)
	in.SetUnencryptedHTTP2(true)
	srv := &http.Server{Addr: *listen, Handler: proxy, Protocols: &in, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}

	if *pprofAddr != "" {
		go func() { log.Println(http.ListenAndServe(*pprofAddr, nil)) }()
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("bareproxy: %v", err)
	}
	fmt.Printf("bareproxy listening on %s, upstream %s (pid %d)\n", ln.Addr(), u, os.Getpid())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("bareproxy: %v", err)
	}
}

// bufferPool is an httputil.BufferPool of buffers of one size.
type bufferPool struct{ p sync.Pool }

func newBufferPool(size int) *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

func (b *bufferPool) Get() []byte { return *b.p.Get().(*[]byte) }

// Put takes the buffer back; the pointer it is stored as is allocated here,
// as the interface leaves no room to keep it.
func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
