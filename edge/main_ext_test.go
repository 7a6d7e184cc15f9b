package edge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/app"
)

// childConfigVar makes the test binary run as an edge process instead of
// the tests: a test starts it to kill it, as a crash would.
const childConfigVar = "EDGE_TEST_CHILD_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(childConfigVar); path != "" {
		os.Exit(runChildEdge(path))
	}
	os.Exit(m.Run())
}

// childHeap is what a child edge's debug listener reports.
type childHeap struct {
	HeapInuse  uint64 // after a garbage collection: live objects
	Goroutines int
}

func serveHeap(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_ = json.NewEncoder(w).Encode(childHeap{HeapInuse: ms.HeapInuse, Goroutines: runtime.NumGoroutine()})
}

func runChildEdge(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	app, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "child")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := app.Listen(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The test's window into the child: its live heap after a collection.
	dbg, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = http.Serve(dbg, http.HandlerFunc(serveHeap)) }()
	fmt.Printf("LISTENING http://%s ADMIN http://%s DEBUG http://%s\n", app.APIAddr(), app.AdminAddr(), dbg.Addr())
	// Serve until killed: a crash releases nothing.
	fmt.Fprintln(os.Stderr, <-app.Failed())
	return 1
}
