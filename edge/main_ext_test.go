package edge_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge"
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

func runChildEdge(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	app, err := edge.NewApp(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "child")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := app.Listen(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("LISTENING http://%s\n", app.APIAddr())
	// Serve until killed: a crash releases nothing.
	fmt.Fprintln(os.Stderr, <-app.Failed())
	return 1
}
