// Command loadtest drives traffic at the API edge (Connect, gRPC, gRPC-Web
// or plain HTTP/JSON) and judges what it sees: plan rate limits and
// well-formed refusals (conformance), operation limits, stream caps and
// environment quotas (operations), Idempotency-Key under duplicate storms
// (idempotency), and the latency the edge adds over the backend (overhead).
//
// It is a test tool for an edge you run, named on its command line; it is
// not a general HTTP benchmark. Run `go run ./loadtest -h` for its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

// mainExit parses flags, runs, prints and writes the report; it returns
// the exit status: 0 PASS, 1 FAIL or could not run, 2 usage, 3
// INCONCLUSIVE.
func mainExit(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n(run with -h for the flags)\n", err)
		return exitUsage
	}
	o.Progress, o.Log = stderr, stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return exitFail
	}
	jsonPath, htmlPath := outputPaths(o.Out, o.Scenario, rep.Started)
	rep.writeText(stdout)
	if err := rep.writeFiles(jsonPath, htmlPath); err != nil {
		fmt.Fprintf(stderr, "loadtest: write the report: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "report %s\n       %s\n", htmlPath, jsonPath)
	return exitStatus(rep.Verdict)
}
