package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	flag "github.com/spf13/pflag"
)

// version is set by a release build (-ldflags "-X main.version=v1.2.3");
// otherwise the module's version (go install ...@v1.2.3) or "(devel)".
var version = ""

// versionLine is what `orgctl version` and `orgctl --version` print.
func versionLine() string {
	v, rev := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = ", commit " + s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("orgctl version %s (%s, %s/%s%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, rev)
}

func defineVersion(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		_, err := fmt.Fprintln(a.stdout, versionLine())
		return err
	}
}
