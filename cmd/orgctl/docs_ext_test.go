package main_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestHelpAndDocsPageNameEveryCommandFlagAndExitStatus checks that -h of
// each command and group and docs/cli.md say the same: every command, every
// flag, every exit status; and that the README's first screen has the login
// line.
func TestHelpAndDocsPageNameEveryCommandFlagAndExitStatus(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(doc)
	c := &cli{t: t, env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	help := c.mustRun("-h").stdout
	commandLine := regexp.MustCompile(`(?m)^  ([a-z]+(?: [a-z]+)?)(?: [A-Z\[].*?)?\s{2,}\S`)
	flagLine := regexp.MustCompile(`(?m)^ +(?:-[a-z], )?--([a-z-]+)`)
	var commands []string
	for _, m := range commandLine.FindAllStringSubmatch(help, -1) {
		if strings.HasPrefix(m[1], "orgctl") {
			continue
		}
		commands = append(commands, m[1])
	}
	if len(commands) < 31 {
		t.Fatalf("-h lists %d commands: %q", len(commands), commands)
	}
	groups := map[string]bool{}
	for _, cmd := range commands {
		if !strings.Contains(page, "`"+cmd) {
			t.Errorf("docs/cli.md does not document %q", cmd)
		}
		if g, _, ok := strings.Cut(cmd, " "); ok {
			groups[g] = true
		}
		// Help is asked for, so it is the answer: standard output, exit 0.
		r := c.run(append(strings.Fields(cmd), "-h")...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: orgctl "+cmd) || r.stderr != "" {
			t.Errorf("orgctl %s -h: %s", cmd, r)
			continue
		}
		for _, m := range flagLine.FindAllStringSubmatch(r.stdout, -1) {
			name := "--" + m[1]
			if !regexp.MustCompile(`(^|[^a-z-])` + regexp.QuoteMeta(name) + `([^a-z-]|$)`).MatchString(page) {
				t.Errorf("docs/cli.md does not document %s of %q", name, cmd)
			}
		}
	}
	// docs/cli.md promises `orgctl <command> -h`: a group's lists its commands.
	for g := range groups {
		r := c.run(g, "-h")
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: orgctl "+g+" <command>") {
			t.Errorf("orgctl %s -h: %s", g, r)
			continue
		}
		for _, cmd := range commands {
			if verb, ok := strings.CutPrefix(cmd, g+" "); ok && !regexp.MustCompile(`(?m)^  `+verb+`\b`).MatchString(r.stdout) {
				t.Errorf("orgctl %s -h does not list %s:\n%s", g, verb, r.stdout)
			}
		}
	}
	if r := c.run("help", "orgs", "create"); r.code != 0 || !strings.Contains(r.stdout, "Usage: orgctl orgs create NAME") {
		t.Errorf("orgctl help orgs create: %s", r)
	}
	for _, status := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "130"} {
		if !strings.Contains(page, "| "+status+" |") || !regexp.MustCompile(`(?m)^  `+status+` +\S`).MatchString(help) {
			t.Errorf("exit status %s is not in both docs/cli.md and -h", status)
		}
	}
	for _, v := range []string{"ORGCTL_CONFIG", "ORGCTL_CONTEXT", "ORGCTL_API", "ORGCTL_ISSUER", "ORGCTL_CLIENT_ID", "ORGCTL_CLIENT_SECRET", "config.yaml", "current-context"} {
		if !strings.Contains(page, v) || !strings.Contains(help, v) {
			t.Errorf("%s is not in both docs/cli.md and -h", v)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	first := string(readme)
	if i := strings.Index(first, "go run ./cmd/orgctl login"); i < 0 || i > strings.Index(first, "## What is here") ||
		i < strings.Index(first, "./scripts/test") || strings.Index(first, "./scripts/test") < strings.Index(first, "go run ./cmd/edge -dev") {
		t.Error("README: the login line does not follow the two set-up commands on the first screen")
	}
}

func TestUsageMistakesExitTwoAndNameTheFix(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no command"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"orgs"}, "create, list, get, update, delete"},
		{[]string{"orgs", "list", "--output", "yaml"}, "table or json"},
		{[]string{"orgs", "list", "--context", "nowhere"}, `no context "nowhere"`},
		{[]string{"projects", "list"}, "--org is required"},
	} {
		r := c.run(tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("orgctl %q: %s\nwant exit 2 and %q", tc.args, r, tc.want)
		}
	}
}

func TestContextsFromTheConfigFileYieldToEnvironmentAndFlags(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	c := &cli{t: t, configDir: home + "/.config", env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config"}}
	c.mustRun("context", "set", "prod", "--api", "https://api.example.com", "--issuer", "https://id.example.com/realms/prod", "--client-id", "orgctl", "--use")
	info, err := os.Stat(home + "/.config/orgctl/config.yaml")
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v, want mode 0600", info, err)
	}
	list := c.mustRun("context", "list").stdout
	if !regexp.MustCompile(`(?m)^\* +prod +https://api\.example\.com `).MatchString(list) || !regexp.MustCompile(`(?m)^ +dev +http://127\.0\.0\.1:8080 `).MatchString(list) {
		t.Errorf("context list:\n%s", list)
	}
	who := func(env []string, args ...string) string {
		t.Helper()
		c2 := &cli{t: t, env: append(append([]string{}, c.env...), env...)}
		// whoami prints the settings first, then fails: nobody is logged in.
		return c2.run(append([]string{"whoami"}, args...)...).stdout
	}
	if got := who(nil); !strings.Contains(got, "Context    prod") || !strings.Contains(got, "https://id.example.com/realms/prod") {
		t.Errorf("from the file:\n%s", got)
	}
	if got := who([]string{"ORGCTL_API=https://env.example.com"}); !strings.Contains(got, "https://env.example.com") {
		t.Errorf("the variable does not win over the file:\n%s", got)
	}
	if got := who([]string{"ORGCTL_API=https://env.example.com"}, "--api", "https://flag.example.com"); !strings.Contains(got, "https://flag.example.com") {
		t.Errorf("the flag does not win over the variable:\n%s", got)
	}
	if got := who([]string{"ORGCTL_CONTEXT=dev"}); !strings.Contains(got, "http://127.0.0.1:8081/realms/dev") {
		t.Errorf("ORGCTL_CONTEXT=dev:\n%s", got)
	}
	c.mustRun("context", "use", "dev")
	c.mustRun("context", "delete", "prod")
	if r := c.run("context", "use", "prod"); r.code != 2 {
		t.Errorf("use of a deleted context: %s", r)
	}
}

func TestIssuerOutOfReachIsExitNineTryAgain(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(),
		"ORGCTL_ISSUER=http://127.0.0.1:1/realms/none", "ORGCTL_CLIENT_ID=svc-admin", "ORGCTL_CLIENT_SECRET=dev-secret"}}
	if r := c.run("orgs", "list"); r.code != 9 || !strings.Contains(r.stderr, "OIDC discovery") {
		t.Errorf("%s\nwant exit 9 naming the discovery", r)
	}
}
