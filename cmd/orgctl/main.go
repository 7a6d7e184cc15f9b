// Command orgctl is the command-line client of the Organization and Access
// API: it logs people in with the OIDC device flow (or a service account in
// with client credentials) and calls every operation through the edge.
//
// docs/cli.md documents every command, flag, the config file and the exit
// statuses; `orgctl -h` says the same.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
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
	kind    commandKind
	// define registers the command's own flags and returns what runs it with
	// the positional arguments.
	define func(fs *flag.FlagSet) func(ctx context.Context, a *app, args []string) error
}

type commandKind int

const (
	callsAPI   commandKind = iota // connection, call and output flags; a token
	mutatesAPI                    // as callsAPI, plus --idempotency-key
	localOnly                     // connection flags only (login, logout, whoami)
	configOnly                    // --config only (context)
)

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, hc: &http.Client{}}
	err := a.dispatch(ctx, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		printError(stderr, ctx, err)
	}
	return exitCode(ctx, err)
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		printUsage(a.stderr)
		return usageErrorf("no command given")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printUsage(a.stdout)
		return nil
	}
	cmd, rest, err := findCommand(args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("orgctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	a.defineGlobals(fs, cmd.kind)
	runIt := cmd.define(fs)
	fs.Usage = func() { printCommandUsage(fs.Output(), cmd, fs) }
	positional, err := parseInterleaved(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if err := a.prepare(ctx, cmd, fs); err != nil {
		return err
	}
	return runIt(ctx, a, positional)
}

// findCommand finds the command that args name: "login", or a group and a
// verb ("orgs create"), a group written in the singular or plural.
func findCommand(args []string) (*command, []string, error) {
	group := canonicalGroup(args[0])
	for i := range commands {
		c := &commands[i]
		name := strings.Fields(c.name)
		if name[0] != group {
			continue
		}
		if len(name) == 1 {
			return c, args[1:], nil
		}
		if len(args) > 1 && args[1] == name[1] {
			return c, args[2:], nil
		}
	}
	var verbs []string
	for _, c := range commands {
		if g, v, ok := strings.Cut(c.name, " "); ok && g == group {
			verbs = append(verbs, v)
		}
	}
	switch {
	case len(verbs) > 0 && len(args) > 1:
		return nil, nil, usageErrorf("unknown command %q %q; %s takes: %s", args[0], args[1], group, strings.Join(verbs, ", "))
	case len(verbs) > 0:
		return nil, nil, usageErrorf("%s needs a command: %s", group, strings.Join(verbs, ", "))
	default:
		return nil, nil, usageErrorf("unknown command %q", args[0])
	}
}

// canonicalGroup accepts the singular, the plural and the long form.
func canonicalGroup(s string) string {
	switch s {
	case "org", "orgs", "organization", "organizations":
		return "orgs"
	case "project", "projects":
		return "projects"
	case "member", "members":
		return "members"
	case "env", "envs", "environment", "environments":
		return "envs"
	case "blueprint", "blueprints":
		return "blueprints"
	case "context", "contexts":
		return "context"
	}
	return s
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments ("orgs get ID -o json" as well as "orgs get -o json ID"); after
// "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func (a *app) defineGlobals(fs *flag.FlagSet, kind commandKind) {
	g := &a.g
	fs.StringVar(&g.config, "config", "", "config file (default $"+envConfig+" or <user config dir>/orgctl/config.yaml)")
	if kind == configOnly {
		return
	}
	fs.StringVar(&g.context, "context", "", "context (installation) to use (default $"+envContext+", the file's current-context, or dev)")
	fs.StringVar(&g.api, "api", "", "API address, e.g. https://api.example.com ($"+envAPI+")")
	fs.StringVar(&g.issuer, "issuer", "", "OIDC issuer URL ($"+envIssuer+")")
	fs.StringVar(&g.clientID, "client-id", "", "OAuth client id: the command-line client for login, or a service account's ($"+envClientID+")")
	fs.StringVar(&g.clientSecret, "client-secret", "", "service account secret: client credentials, a new token for each command (prefer $"+envClientSecret+": flags show in ps)")
	if kind == localOnly {
		return
	}
	fs.StringVar(&g.output, "output", formatTable, "output format: table or json")
	fs.StringVar(&g.output, "o", formatTable, "shorthand for --output")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound on each call (a watch: on the whole watch, and only when given); 0 for none")
	fs.BoolVar(&g.wait, "wait", false, "when the API refuses with a retry delay (rate limit, busy), wait and call again (up to --retries, default "+fmt.Sprint(defaultRetriesWithWait)+")")
	fs.IntVar(&g.retries, "retries", 0, "how many times to call again after such a refusal (0: never, unless --wait)")
	fs.DurationVar(&g.maxWait, "max-wait", 2*time.Minute, "most time to spend waiting over all retries")
	if kind == mutatesAPI {
		fs.StringVar(&g.idempotencyKey, "idempotency-key", "", "Idempotency-Key of the call (default: a new random key); run again with the same key to retry safely")
	}
}

// prepare resolves the settings and, for API commands, the token source and
// clients.
func (a *app) prepare(ctx context.Context, cmd *command, fs *flag.FlagSet) error {
	if cmd.kind == configOnly {
		return nil
	}
	s, err := resolve(a.getenv, &a.g)
	if err != nil {
		return err
	}
	a.settings = s
	if cmd.kind == localOnly {
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
	retriesSet := false
	fs.Visit(func(f *flag.Flag) { retriesSet = retriesSet || f.Name == "retries" })
	retries := a.g.retries
	if a.g.wait && !retriesSet {
		retries = defaultRetriesWithWait
	}
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

// printUsage is `orgctl -h`: the commands, then what docs/cli.md says of
// flags, files, variables and exit statuses.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `orgctl: the command-line client of the Organization and Access API

Usage: orgctl <command> [arguments] [flags]     (flags may come before or after arguments)

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprint(w, `
Run 'orgctl <command> -h' for a command's flags.

Start: with 'go run ./cmd/edge -dev' running, 'orgctl login' logs in to the
development context. Elsewhere, add your installation once:
  orgctl context set prod --api https://api.example.com --issuer https://id.example.com/realms/prod --client-id orgctl --use
  orgctl login

Flags of every API command:
  --context NAME        installation to use, a context of the config file (`+envContext+`)
  --api URL             API address                        (`+envAPI+`)
  --issuer URL          OIDC issuer URL                    (`+envIssuer+`)
  --client-id ID        command-line client, or a service account's client id (`+envClientID+`)
  --client-secret S     service account secret: client credentials, a new token
                        for each command, nothing stored   (`+envClientSecret+`)
  --config FILE         config file                        (`+envConfig+`)
  -o, --output FORMAT   table (default) or json: the API's lowerCamelCase fields
  --timeout D           bound on each call (default 30s; 0: none)
  --wait                wait out refusals that name a retry delay (rate limits)
  --retries N           calls again after such refusals (default 0; 5 with --wait)
  --max-wait D          most time spent waiting over all retries (default 2m)
  --idempotency-key K   (commands that change something) the call's Idempotency-Key;
                        default a new random one; the same key replays the first outcome
Order: flags, then environment variables, then the context in the config file.

Config file: $`+envConfig+` or <user config dir>/orgctl/config.yaml
(~/.config/orgctl/config.yaml on Linux), YAML:
  current-context: prod
  contexts:
    prod: {api: https://api.example.com, issuer: https://id.example.com/realms/prod, client-id: orgctl}
The context "dev" (http://127.0.0.1:8080, issuer http://127.0.0.1:8081/realms/dev,
client cli) exists without a file. Sessions (tokens and refresh tokens) are kept
in <user config dir>/orgctl/tokens/<context>.json, owner-only, never printed; a
token about to expire is refreshed before a call.

`+exitCodesSummary+`
`)
}

// printCommandUsage is `orgctl <command> -h`.
func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: orgctl %s [flags]\n\n%s\n\nFlags:\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\n%s\n", exitCodesSummary)
}
