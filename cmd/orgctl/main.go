// Command orgctl is the command-line client of the Organization and Access
// API: it logs people in with the OIDC device flow (or a service account in
// with client credentials) and calls every operation through the edge.
//
// docs/cli.md documents every command, flag, the config file and the exit
// statuses; `orgctl -h` and `orgctl <command> -h` say the same.
package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel(errInterrupted)
		// A second Ctrl-C ends at once, should a call not return.
		<-sigs
		os.Exit(exitInterrupted)
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	cancel(nil)
	os.Exit(code)
}

// app is one run of the command.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	g              globalFlags
	hc             *http.Client
	settings       *settings
	policy         *callPolicy
	api            clients

	root  *cobra.Command                 // the command tree (completion writes its scripts)
	kinds map[*cobra.Command]commandKind // the kind of each command of commands
}

// globalFlags are the flags every command takes (connection) or every API
// command takes (calls and output).
type globalFlags struct {
	config, context, api, issuer, clientID, clientSecret string

	output         string
	timeout        time.Duration
	wait           bool
	retries        int
	maxWait        time.Duration
	idempotencyKey string
}

// command is one subcommand.
type command struct {
	name    string // "orgs create"
	args    string // positional arguments, for the usage line
	summary string
	// long, when set, is what `-h` says of the command after the summary.
	long string
	kind commandKind
	// define registers the command's own flags and returns what runs it with
	// the positional arguments.
	define func(fs *flag.FlagSet) runFunc
	// completeArgs, when set, lists what the shell may complete the
	// argument with.
	completeArgs func(a *app) []string
}

type runFunc = func(ctx context.Context, a *app, args []string) error

type commandKind int

const (
	callsAPI   commandKind = iota // connection, call and output flags; a token
	mutatesAPI                    // as callsAPI, plus --idempotency-key
	localOnly                     // connection flags only (login, logout, whoami)
	configOnly                    // --config only (context, version, completion)
)

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, hc: &http.Client{}}
	root := a.commandTree()
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		if cmd == nil {
			cmd = root
		}
		printError(stderr, ctx, err, cmd.CommandPath())
	}
	return exitCode(ctx, err)
}

// prepare checks the global flags a command of kind k was given and
// resolves the settings and, for API commands, the token source and clients.
func (a *app) prepare(c *cobra.Command, k commandKind) error {
	if err := globalsApply(c, k); err != nil {
		return err
	}
	if k == configOnly {
		return nil
	}
	s, err := resolve(a.getenv, &a.g)
	if err != nil {
		return err
	}
	a.settings = s
	if k == localOnly {
		return nil
	}
	if a.g.output != formatTable && a.g.output != formatJSON {
		return usageErrorf("--output %q: want table or json", a.g.output)
	}
	if a.g.retries < 0 || a.g.maxWait < 0 || a.g.timeout < 0 {
		return usageErrorf("--retries, --max-wait and --timeout cannot be negative")
	}
	if s.API == "" {
		return usageErrorf("no API address: give --api, set %s, or set it in the context", envAPI)
	}
	retries := a.g.retries
	if a.g.wait && !c.Flags().Changed("retries") {
		retries = defaultRetriesWithWait
	}
	ctx := c.Context()
	tokens, err := tokenSource(ctx, s, a.hc)
	if err != nil {
		return err
	}
	a.policy = &callPolicy{
		tokens:         tokens,
		idempotencyKey: first(a.g.idempotencyKey, newIdempotencyKey()),
		timeout:        a.g.timeout,
		retries:        retries,
		maxWait:        a.g.maxWait,
		stderr:         a.stderr,
	}
	a.api = newClients(a.hc, s.API, a.policy)
	return nil
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, names ...string) error {
	if len(args) != len(names) {
		if len(names) == 0 {
			return usageErrorf("unexpected argument %q", args[0])
		}
		return usageErrorf("want %d argument(s): %s; got %d", len(names), strings.Join(names, " "), len(args))
	}
	for i, a := range args {
		if a == "" {
			return usageErrorf("%s is empty", names[i])
		}
	}
	return nil
}
