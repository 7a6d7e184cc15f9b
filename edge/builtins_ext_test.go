package edge_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Linked so that the test also walks services the edge does not
	// serve: a path the edge answered outside the chain would show here.
	_ "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

const reflectionV1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

// h2cTransport is an HTTP/2 client over cleartext, one call per stream of
// its connections, as gRPC clients are.
func h2cTransport(t *testing.T) *http.Transport {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// grpcAnswer is what a raw gRPC stream ended with.
type grpcAnswer struct {
	status, message string
	err             error
}

// rawGRPCStream opens a gRPC stream of procedure whose request body is
// body, and sends its answer (status and message, from the trailers or a
// trailers-only answer) once the stream ends.
func rawGRPCStream(ctx context.Context, tr http.RoundTripper, base, procedure, token string, body io.Reader, answers chan<- grpcAnswer) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+procedure, body)
	if err != nil {
		answers <- grpcAnswer{err: err}
		return
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		answers <- grpcAnswer{err: err}
		return
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	a := grpcAnswer{status: res.Header.Get("Grpc-Status"), message: res.Header.Get("Grpc-Message")}
	if a.status == "" {
		a.status, a.message = res.Trailer.Get("Grpc-Status"), res.Trailer.Get("Grpc-Message")
	}
	answers <- a
}

// streamCap is the subject's stream cap of the configuration: the largest
// concurrent_streams of its operation table.
func streamCap(cfg *config.Config) int {
	n := 0
	for _, op := range cfg.Operations {
		n = max(n, op.ConcurrentStreams)
	}
	return n
}

// TestStalledReflectionStreamsAreRefusedPastTheSubjectsStreamCap: one
// subject opens 120 reflection streams and sends nothing on them. The
// edge holds as many as the subject's stream cap (20) waiting for their
// first message, and refuses the other 100 at once (resource_exhausted:
// the stream cap, or reflection's own rate, whichever comes first).
// Before, reflection was answered outside the chain and all 120 stayed
// open.
func TestStalledReflectionStreamsAreRefusedPastTheSubjectsStreamCap(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-reflection-stall")
	limit := streamCap(s.edge.Config)
	const streams = 120
	tr := h2cTransport(t)
	answers := make(chan grpcAnswer, streams)
	var bodies []*io.PipeWriter
	for range streams {
		pr, pw := io.Pipe()
		bodies = append(bodies, pw)
		go rawGRPCStream(ctxT(t), tr, s.edge.URL, reflectionV1, tok, pr, answers)
	}
	refused := 0
	for range streams - limit {
		a := <-answers
		if a.err != nil || a.status != "8" || !strings.Contains(a.message, "streams may be open at once") && !strings.Contains(a.message, "a minute") {
			t.Fatalf("a stream past the cap of %d: %+v, want resource_exhausted for the stream cap or the rate", limit, a)
		}
		refused++
	}
	// The streams held end when their client ends them: none was refused.
	for _, pw := range bodies {
		_ = pw.Close()
	}
	for range limit {
		if a := <-answers; a.err != nil || a.status != "0" {
			t.Fatalf("a stream within the cap, ended by its client: %+v, want ok", a)
		}
	}
	t.Logf("%d streams refused past the cap of %d", refused, limit)
}

// TestAReflectionMessageLargerThanReflectionNeedsIsRefusedUnread: 120
// reflection streams each declare a message just under the body bound
// (4 MiB), send 1 KiB of it and stall. Each is refused (resource_exhausted)
// without the edge waiting for the rest, so no stream pins a message's
// buffer: a reflection request names a symbol, and the edge reads at most
// 16 KiB of one. Before, each waited for its 4 MiB, holding what had come.
func TestAReflectionMessageLargerThanReflectionNeedsIsRefusedUnread(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	tok := token("free-reflection-large")
	const streams = 120
	declared := uint32(s.edge.Config.Requests.MaxBodyBytes) - 1
	tr := h2cTransport(t)
	answers := make(chan grpcAnswer, streams)
	for range streams {
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		go rawGRPCStream(ctxT(t), tr, s.edge.URL, reflectionV1, tok, pr, answers)
		go func() {
			prefix := make([]byte, 5, 5+1024)
			binary.BigEndian.PutUint32(prefix[1:], declared)
			_, _ = pw.Write(append(prefix, make([]byte, 1024)...)) // then stall: never closed until the test ends
		}()
	}
	for i := range streams {
		// Refused by the message bound or, past the subject's stream cap,
		// by the cap: both resource_exhausted, and both at once.
		if a := <-answers; a.err != nil || a.status != "8" {
			t.Fatalf("stream %d of %d: %+v, want resource_exhausted while its message is incomplete", i+1, streams, a)
		}
	}
}

// apiListenerPaths returns every procedure path of every service linked
// into this test binary: the API's, reflection's, gRPC health's, and any
// other a dependency registers. The edge serves some of them and refuses
// the others; either way, the answer must come from the chain.
func apiListenerPaths() []string {
	var paths []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				paths = append(paths, fmt.Sprintf("/%s/%s", sd.FullName(), sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	return append(paths, "/", "/not/a/procedure")
}

// TestEveryPathOfTheAPIListenerIsBoundedLoggedAndCounted: for every
// procedure of every service linked into the binary (the API's, the
// reflection the edge answers itself, gRPC health, ...) and two paths that
// name none, a call with a body over requests.max_body_bytes is refused
// by the body bound (or, for a path that names no procedure, as unknown)
// and a call without a token is answered too: each such call has its
// access line and is counted in edge_requests_total; gRPC health answers
// Check without a token. A step that answered
// some path before the chain (as reflection was) fails here.
func TestEveryPathOfTheAPIListenerIsBoundedLoggedAndCounted(t *testing.T) {
	t.Parallel()
	// A small body bound: the calls over it stay small. A short stream
	// deadline: gRPC health's Watch, open without a token, streams until
	// it.
	s, _ := startTracedStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Requests.MaxBodyBytes = 4 * config.KiB
		c.Requests.MaxStreamTimeout = 2 * time.Second
	})
	paths := apiListenerPaths()
	before := testkit.Scrape(t, s.edge.AdminURL+"/metrics").Sum("edge_requests_total")
	calls := 0
	for _, path := range paths {
		_, known := config.LookupProcedure(path)
		_, builtin := config.BuiltinProcedures[path]
		// Over the body bound: refused before any of it is read.
		big := strings.NewReader(strings.Repeat("x", int(s.edge.Config.Requests.MaxBodyBytes)+1))
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.edge.URL+path, big)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		answer, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		calls++
		switch {
		case known || builtin:
			tooLarge := res.StatusCode == http.StatusTooManyRequests && strings.Contains(string(answer), "REQUEST_TOO_LARGE")
			if !tooLarge && res.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("%s with a body over the bound: HTTP %d %s, want it refused (REQUEST_TOO_LARGE, or 415 for a streaming procedure called as unary JSON)", path, res.StatusCode, answer)
			}
		default:
			if res.StatusCode < 400 {
				t.Errorf("%s, no procedure of the API: HTTP %d, want it refused", path, res.StatusCode)
			}
		}
	}
	// Without a token, over gRPC, each with one empty message:
	// unauthenticated for what the edge serves, but for gRPC health, which
	// needs no token (Check answers, Watch streams until its deadline), and
	// unimplemented for the rest.
	tr := h2cTransport(t)
	answers := make(chan grpcAnswer, len(paths))
	for _, path := range paths {
		rawGRPCStream(ctxT(t), tr, s.edge.URL, path, "", bytes.NewReader(make([]byte, 5)), answers)
		calls++
		a := <-answers
		_, known := config.LookupProcedure(path)
		info, builtin := config.BuiltinProcedures[path]
		want := "12" // unimplemented
		switch {
		case path == "/grpc.health.v1.Health/Check":
			want = "0" // SERVING
		case builtin && info.Service == config.HealthService:
			want = "4" // Watch: SERVING, then deadline_exceeded at max_stream_timeout
		case known || builtin:
			want = "16" // unauthenticated
		}
		if a.err != nil || a.status != want {
			t.Errorf("%s over gRPC without a token: %+v, want grpc-status %s", path, a, want)
		}
	}
	testkit.WaitFor(t, "an access line per call", func() bool { return strings.Count(s.edgeLog.String(), `"msg":"call"`) >= calls })
	if n := strings.Count(s.edgeLog.String(), `"msg":"call"`); n != calls {
		t.Errorf("%d access lines for %d calls", n, calls)
	}
	testkit.ScrapeUntil(t, s.edge.AdminURL+"/metrics", "every call counted", func(m testkit.Samples) bool {
		return m.Sum("edge_requests_total")-before == float64(calls)
	})
	t.Logf("%d paths, %d calls", len(paths), calls)
}
