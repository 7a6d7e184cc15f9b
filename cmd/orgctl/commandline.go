package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
)

// The command line follows the conventions of gh, kubectl and doctl, which
// are built the same way: spf13/cobra for commands and spf13/pflag for
// flags. POSIX long and short flags (--output json, --output=json, -o json,
// -ojson), global flags before or after the command and its arguments,
// -h on every command and group, "did you mean" on a mistyped command or
// flag, and completion scripts generated from the same tree. Writing that
// again on the standard flag package (which stops at the first argument
// and knows no short forms) would be more code to keep right than the two
// modules, which most Go command-line tools already trust.

// groupInfo is what a group of commands ("orgs") says of itself.
var groupInfo = map[string]struct {
	summary string
	aliases []string
}{
	"context":    {"the installations orgctl knows (the config file)", []string{"contexts"}},
	"orgs":       {"organizations", []string{"org", "organization", "organizations", "organisation", "organisations"}},
	"projects":   {"projects of an organization", []string{"project"}},
	"members":    {"members and invitations of an organization", []string{"member"}},
	"envs":       {"environments of a project", []string{"env", "environment", "environments"}},
	"blueprints": {"the blueprint catalog and blueprint documents", []string{"blueprint"}},
}

// Global flags by what they are for: a command takes those its kind needs
// (see applies).
var (
	connectionFlags = []string{"context", "api", "issuer", "client-id", "client-secret"}
	callFlags       = []string{"output", "timeout", "wait", "retries", "max-wait"}
)

// applies reports whether the global flag name means something to a
// command of kind k.
func applies(k commandKind, name string) bool {
	switch {
	case name == "config" || name == "help":
		return true
	case slices.Contains(connectionFlags, name):
		return k != configOnly
	case slices.Contains(callFlags, name):
		return k == callsAPI || k == mutatesAPI
	}
	return false
}

// commandTree is the command line: a cobra command for each entry of
// commands, grouped under its first word ("orgs create" under "orgs"), the
// global flags on the root, so that they are known wherever they stand.
func (a *app) commandTree() *cobra.Command {
	cobra.EnableCommandSorting = false // the order of commands, as -h lists them
	a.kinds = map[*cobra.Command]commandKind{}
	root := &cobra.Command{
		Use:                        "orgctl",
		Short:                      "the command-line client of the Organization and Access API",
		Args:                       cobra.ArbitraryArgs, // groupRun names an unknown command
		RunE:                       groupRun,
		SilenceErrors:              true, // printError writes them, prefixed orgctl:
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true}, // ours is in commands
		Version:                    versionLine(),                                    // --version
	}
	root.SetVersionTemplate("{{.Version}}\n")
	a.root = root
	a.defineGlobals(root.PersistentFlags())
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { a.writeHelp(c.OutOrStdout(), c) })
	root.SetUsageFunc(func(c *cobra.Command) error { a.writeHelp(c.OutOrStderr(), c); return nil })
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion(formatTable, formatJSON))
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)

	groups := map[string]*cobra.Command{}
	for i := range commands {
		spec := &commands[i]
		parent := root
		verb := spec.name
		if g, v, ok := strings.Cut(spec.name, " "); ok {
			verb = v
			parent = groups[g]
			if parent == nil {
				info := groupInfo[g]
				parent = &cobra.Command{Use: g, Short: info.summary, Aliases: info.aliases,
					Args: cobra.ArbitraryArgs, RunE: groupRun, SuggestionsMinimumDistance: 2}
				groups[g] = parent
				root.AddCommand(parent)
			}
		}
		c := &cobra.Command{Use: strings.TrimSpace(verb + " " + spec.args), Short: spec.summary, Long: spec.long,
			Args: cobra.ArbitraryArgs} // wantArgs words the mistakes
		c.Flags().SortFlags = false
		runIt := spec.define(c.Flags())
		if spec.kind == mutatesAPI {
			c.Flags().StringVar(&a.g.idempotencyKey, "idempotency-key", "", "the call's Idempotency-Key (default: a new random key); run again with the same key to retry safely")
		}
		if spec.completeArgs != nil {
			c.ValidArgsFunction = func(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return spec.completeArgs(a), cobra.ShellCompDirectiveNoFileComp
			}
		}
		c.RunE = func(c *cobra.Command, args []string) error {
			if err := a.prepare(c, spec.kind); err != nil {
				return err
			}
			return runIt(c.Context(), a, args)
		}
		a.kinds[c] = spec.kind
		parent.AddCommand(c)
	}
	return root
}

func (a *app) defineGlobals(fs *flag.FlagSet) {
	g := &a.g
	fs.SortFlags = false
	fs.StringVar(&g.config, "config", "", "the config file ($"+envConfig+"; default <user config dir>/orgctl/config.yaml)")
	fs.StringVar(&g.context, "context", "", "the context (installation) to use ($"+envContext+"; default the file's current-context, or dev)")
	fs.StringVar(&g.api, "api", "", "the API's address, e.g. https://api.example.com ($"+envAPI+")")
	fs.StringVar(&g.issuer, "issuer", "", "the OIDC issuer's URL, e.g. https://id.example.com/realms/prod ($"+envIssuer+")")
	fs.StringVar(&g.clientID, "client-id", "", "the OAuth client id: the command-line client for login, or a service account's ($"+envClientID+")")
	fs.StringVar(&g.clientSecret, "client-secret", "", "a service account's secret: client credentials, a new token for each command, nothing stored (prefer $"+envClientSecret+": flags show in ps)")
	fs.StringVarP(&g.output, "output", "o", formatTable, "the output format: table or json (the API's lowerCamelCase fields)")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound on each call (envs watch: on the whole watch, and only when given); 0 for none")
	fs.BoolVar(&g.wait, "wait", false, "wait out refusals that name a retry delay (rate limits, busy) and call again (up to --retries, default "+fmt.Sprint(defaultRetriesWithWait)+")")
	fs.IntVar(&g.retries, "retries", 0, "how many times to call again after such a refusal (0: never, unless --wait)")
	fs.DurationVar(&g.maxWait, "max-wait", 2*time.Minute, "most time to spend waiting over all retries")
}

// groupRun runs the root or a group ("orgs") given without a command of
// theirs, or with one they do not have.
func groupRun(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		if !c.HasParent() {
			_ = c.Usage()
			return usageErrorf("no command given")
		}
		var verbs []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				verbs = append(verbs, sub.Name())
			}
		}
		return usageErrorf("%s needs a command: %s", c.Name(), strings.Join(verbs, ", "))
	}
	return usageErrorf("unknown command %q for %q%s", args[0], c.CommandPath(), didYouMean(c.SuggestionsFor(args[0])))
}

// flagError makes pflag's errors usage errors, with a suggestion for a
// mistyped flag name.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var like []string
		c.Flags().VisitAll(func(f *flag.Flag) {
			if !f.Hidden && (levenshtein(name, f.Name) <= 2 || strings.HasPrefix(f.Name, name)) {
				like = append(like, "--"+f.Name)
			}
		})
		msg += didYouMean(like)
	}
	return usageErrorf("%s", msg)
}

func didYouMean(suggestions []string) string {
	if len(suggestions) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n  " + strings.Join(suggestions, "\n  ")
}

// levenshtein is the edit distance of a and b (the same measure as cobra's
// suggestions for commands).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// globalsApply refuses a global flag that means nothing to the command
// (--output on login), rather than ignoring it.
func globalsApply(c *cobra.Command, k commandKind) error {
	var err error
	c.InheritedFlags().VisitAll(func(f *flag.Flag) {
		if err == nil && f.Changed && !applies(k, f.Name) {
			err = usageErrorf("--%s does not apply to %s", f.Name, c.CommandPath())
		}
	})
	return err
}

// fixedCompletion completes a flag's value from a fixed list.
func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeContexts completes --context with the config file's contexts.
func (a *app) completeContexts(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return contextNames(a), cobra.ShellCompDirectiveNoFileComp
}

// contextNames is the contexts of the config file, dev included; none when
// it cannot be read (a completion has nowhere to say why).
func contextNames(a *app) []string {
	_, f, err := a.loadForEdit()
	if err != nil {
		return nil
	}
	return f.names()
}
