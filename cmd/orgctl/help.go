package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
)

// writeHelp is what -h prints (to standard output) and what a usage
// mistake without a command prints (to standard error): for the root,
// every command and what docs/cli.md says of flags, files, variables and
// exit statuses; for a group, its commands; for a command, its flags.
func (a *app) writeHelp(w io.Writer, c *cobra.Command) {
	switch {
	case !c.HasParent():
		a.writeRootHelp(w, c)
	case c.HasAvailableSubCommands():
		writeGroupHelp(w, c)
	default:
		a.writeCommandHelp(w, c)
	}
}

func (a *app) writeRootHelp(w io.Writer, root *cobra.Command) {
	fmt.Fprint(w, `orgctl: the command-line client of the Organization and Access API

Usage: orgctl <command> [arguments] [flags]

Flags may stand before or after the command and its arguments, long or short
(--output json, --output=json, -o json, -ojson); after -- everything is an
argument.

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-40s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprint(w, `
Run 'orgctl <command> -h' for a command's flags, 'orgctl <group> -h' for a
group's commands. Groups take the singular or the plural (org, orgs,
organizations; env, envs, environments; ...).

Start: with 'go run ./cmd/edge -dev' running, 'orgctl login' logs in to the
development context. Elsewhere, add your installation once:
  orgctl context set prod --api https://api.example.com --issuer https://id.example.com/realms/prod --client-id orgctl --use
  orgctl login

Global flags: API commands take them all; login, logout and whoami the
connection flags (--context, --api, --issuer, --client-id, --client-secret);
every command --config.
`)
	fmt.Fprint(w, root.PersistentFlags().FlagUsages())
	fmt.Fprint(w, `Commands that change something also take --idempotency-key K: the call's
Idempotency-Key, by default a new random one; the same key replays the first
outcome.
Order: flags, then environment variables, then the context in the config file.

Config file: $`+envConfig+` or <user config dir>/orgctl/config.yaml
(~/.config/orgctl/config.yaml on Linux), YAML:
  current-context: prod
  contexts:
    prod: {api: https://api.example.com, issuer: https://id.example.com/realms/prod, client-id: orgctl}
The context "dev" (http://127.0.0.1:8080, issuer http://127.0.0.1:8081/realms/dev,
client cli) exists without a file. Sessions (tokens and refresh tokens) are kept
in <user config dir>/orgctl/tokens/<context>.json, owner-only, never printed; a
token about to expire is refreshed before a call, and one the API refuses before
its expiry is refreshed once, the call made again, before asking to log in.

`+exitCodesSummary+`
`)
}

func writeGroupHelp(w io.Writer, g *cobra.Command) {
	fmt.Fprintf(w, "%s\n\nUsage: %s <command> [arguments] [flags]\n", g.Short, g.CommandPath())
	if len(g.Aliases) > 0 {
		fmt.Fprintf(w, "Also written: %s\n", strings.Join(g.Aliases, ", "))
	}
	fmt.Fprint(w, "\nCommands:\n")
	for _, c := range g.Commands() {
		if c.IsAvailableCommand() {
			fmt.Fprintf(w, "  %-24s %s\n", c.Use, c.Short)
		}
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", g.CommandPath())
}

func (a *app) writeCommandHelp(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "%s\n", c.Short)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	fmt.Fprintf(w, "\nUsage: %s [flags]\n\nFlags:\n%s", strings.TrimSuffix(c.CommandPath(), c.Name())+c.Use, c.LocalFlags().FlagUsages())
	kind, ok := a.kinds[c]
	if !ok {
		kind = configOnly // cobra's own: help
	}
	global := flag.NewFlagSet("global", flag.ContinueOnError)
	global.SortFlags = false
	inherited := c.InheritedFlags()
	c.Root().PersistentFlags().VisitAll(func(f *flag.Flag) { // in the order they were defined
		if inherited.Lookup(f.Name) != nil && applies(kind, f.Name) {
			global.AddFlag(f)
		}
	})
	if global.HasFlags() {
		fmt.Fprintf(w, "\nGlobal flags:\n%s", global.FlagUsages())
	}
	fmt.Fprintf(w, "\n%s\n", exitCodesSummary)
}
