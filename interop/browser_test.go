package interop_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// pageHost is where the test page is served from: another origin than the
// edge's (127.0.0.1), as a web application's own host is.
const pageHost = "127.0.0.2"

// TestChromiumPageOnAnotherOriginCallsTheEdge: a page served from another
// origin than the edge's, in headless Chromium, with connect-web (Connect
// and gRPC-Web transports: a unary call, a replay read through
// Idempotent-Replayed, a watched status change, a rate refusal read through
// findDetails and its headers) and Google's grpc-web client in text mode
// (a unary call and a watched status change).
func TestChromiumPageOnAnotherOriginCallsTheEdge(t *testing.T) {
	t.Parallel()
	bin := node(t)
	chromium := testenv.Command(t, "chromium")
	bundle := bundlePage(t)

	ln, err := net.Listen("tcp", pageHost+":0")
	if err != nil {
		t.Fatalf("listen on %s (the page's origin): %v", pageHost, err)
	}
	origin := "http://" + ln.Addr().String()
	s := startStack(t, stackOptions{origin: origin})
	checks := map[string]connectInput{
		"connect":  newConnectInput(t, s, "web-connect"),
		"grpc-web": newConnectInput(t, s, "web-grpc-web"),
	}
	text := newConnectInput(t, s, "web-text")
	input, err := json.Marshal(map[string]any{"edge": s.edge.URL, "checks": checks, "text": text})
	if err != nil {
		t.Fatal(err)
	}
	servePage(t, ln, bundle, s.descriptors, input)

	var out struct {
		Page struct {
			Fatal       string        `json:"fatal"`
			Origin      string        `json:"origin"`
			Connect     connectReport `json:"connect"`
			GRPCWeb     connectReport `json:"grpc-web"`
			GRPCWebText textReport    `json:"grpc-web-text"`
		} `json:"page"`
		Log []string `json:"log"`
	}
	runJSON(t, map[string]any{"chromium": chromium, "url": origin + "/", "timeoutMs": 90_000}, &out, bin, "browser/drive.js")
	// A refused cross-origin call is explained only in the browser's log.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the browser's log:\n%s", strings.Join(out.Log, "\n"))
		}
	})
	if out.Page.Fatal != "" {
		t.Fatalf("the page failed: %s", out.Page.Fatal)
	}
	if out.Page.Origin != origin || strings.HasPrefix(s.edge.URL, origin) {
		t.Fatalf("the page ran on %q, the edge is %s: want the page on %s, another origin", out.Page.Origin, s.edge.URL, origin)
	}
	t.Run("connect-web/connect", func(t *testing.T) { checkConnect(t, checks["connect"], out.Page.Connect) })
	t.Run("connect-web/grpc-web", func(t *testing.T) { checkConnect(t, checks["grpc-web"], out.Page.GRPCWeb) })
	t.Run("grpc-web-text", func(t *testing.T) {
		r := out.Page.GRPCWebText
		t.Run("unary", func(t *testing.T) {
			noError(t, "CreateEnvironment", r.Unary.Error)
			if !strings.HasPrefix(r.Unary.ID, "env_") {
				t.Fatalf("created %q, want env_…", r.Unary.ID)
			}
		})
		t.Run("watch", func(t *testing.T) { checkWatch(t, r.Watch) })
	})
}

// textReport is what the page tells of its calls with grpc-web in text mode.
type textReport struct {
	Unary struct {
		ID    string       `json:"id"`
		Error *clientError `json:"error"` // code: grpc-web's StatusCode name
	} `json:"unary"`
	Watch watchReport `json:"watch"`
}

// bundlePage bundles browser/page.js and the npm packages it imports with
// esbuild, once per run of this test, and returns the bundle's path.
func bundlePage(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "page.js")
	r := runTool(t, nil, "node_modules/.bin/esbuild", "browser/page.js", "--bundle", "--format=esm",
		"--target=chrome120", "--log-level=warning", "--outfile="+out)
	if r.exit != 0 {
		t.Fatalf("esbuild: exit %d\n%s", r.exit, r.stderr)
	}
	return out
}

// servePage serves the page, its bundle, the API's descriptors and the
// page's input on ln until the test ends.
func servePage(t *testing.T, ln net.Listener, bundle, descriptors string, input []byte) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, "browser/index.html") })
	mux.HandleFunc("GET /page.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, bundle)
	})
	mux.HandleFunc("GET /api.binpb", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, descriptors) })
	mux.HandleFunc("GET /input.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(input)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("page server: %v", err)
		}
	})
}
