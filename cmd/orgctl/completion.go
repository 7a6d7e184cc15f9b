package main

import (
	"context"

	flag "github.com/spf13/pflag"
)

// shells are the shells `orgctl completion` writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

const completionHelp = `The script completes commands, flags, --output's formats, context names
(--context, context use, context delete) and these shells' names. It asks
orgctl itself (a hidden __complete command), so it stays right as orgctl
changes. Load it:

  bash   source <(orgctl completion bash)         in ~/.bashrc; needs the bash-completion package
  zsh    source <(orgctl completion zsh)          in ~/.zshrc, after compinit
  fish   orgctl completion fish > ~/.config/fish/completions/orgctl.fish
  powershell   orgctl completion powershell | Out-String | Invoke-Expression   in $PROFILE`

func defineCompletion(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "SHELL"); err != nil {
			return err
		}
		switch args[0] {
		case "bash":
			return a.root.GenBashCompletionV2(a.stdout, true)
		case "zsh":
			return a.root.GenZshCompletion(a.stdout)
		case "fish":
			return a.root.GenFishCompletion(a.stdout, true)
		case "powershell":
			return a.root.GenPowerShellCompletionWithDesc(a.stdout)
		}
		return usageErrorf("no completion for %q: want bash, zsh, fish or powershell", args[0])
	}
}
