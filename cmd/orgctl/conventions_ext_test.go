package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/orgedge/edge/internal/testenv"
)

// The conventions of gh, kubectl and doctl, through the built command.

func TestGlobalFlagsGoBeforeOrAfterTheCommandInLongAndShortForms(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st)
	c.login("alice", "alice")
	c.mustRun("orgs", "create", "acme", "--billing-email", "billing@acme.example")

	if r := c.mustRun("--context", "dev", "whoami"); !strings.Contains(r.stdout, "Context    dev") || !strings.Contains(r.stdout, "alice") {
		t.Errorf("orgctl --context dev whoami: %s", r)
	}
	for _, args := range [][]string{
		{"-o", "json", "orgs", "list"},
		{"-ojson", "orgs", "list"},
		{"--output=json", "orgs", "list"},
		{"--output", "json", "orgs", "list"},
		{"orgs", "-o", "json", "list"},
		{"orgs", "list", "-ojson"},
		{"--context=dev", "--timeout", "10s", "org", "list", "--output", "json"},
	} {
		r := c.run(args...)
		if r.code != 0 {
			t.Errorf("orgctl %s: %s", strings.Join(args, " "), r)
			continue
		}
		if got := jq(t, `.organizations | map(.name) | join(",")`, r.stdout); got != "acme" {
			t.Errorf("orgctl %s printed %q, want the JSON list with acme", strings.Join(args, " "), got)
		}
	}
	// After --, a dash is an argument: the organization "-x" does not exist.
	if r := c.run("orgs", "get", "-o", "json", "--", "-x"); r.code != 5 {
		t.Errorf("orgs get -- -x: %s\nwant exit 5 (not found)", r)
	}
}

func TestMistypedCommandOrFlagIsAUsageErrorThatSuggestsTheRightOne(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	for _, tc := range []struct {
		args       []string
		want, help string
	}{
		{[]string{"ogrs", "list"}, "Did you mean this?\n  orgs\n", "orgctl -h"},
		{[]string{"orgs", "lsit"}, "Did you mean this?\n  list\n", "orgctl orgs -h"},
		{[]string{"envs", "wtach", "ENV"}, "Did you mean this?\n  watch\n", "orgctl envs -h"},
		{[]string{"orgs", "list", "--ouput", "json"}, "Did you mean this?\n  --output\n", "orgctl orgs list -h"},
		{[]string{"--contxt", "dev", "whoami"}, "Did you mean this?\n  --context\n", "orgctl whoami -h"},
	} {
		r := c.run(tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "orgctl: ") || !strings.Contains(r.stderr, tc.want) ||
			!strings.Contains(r.stderr, "Run '"+tc.help+"' for usage.") || r.stdout != "" {
			t.Errorf("orgctl %s: %s\nwant exit 2, an error prefixed orgctl:, %q and a pointer to %s", strings.Join(tc.args, " "), r, tc.want, tc.help)
		}
	}
}

func TestVersionAndDashDashVersionNameTheBuild(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, env: []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}}
	// The command is built by this test run's toolchain (TestMain).
	want := "orgctl version (devel) (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if r := c.mustRun(args...); r.stdout != want || r.stderr != "" {
			t.Errorf("orgctl %s: %s\nwant %q", args[0], r, want)
		}
	}
	if r := c.run("version", "extra"); r.code != 2 {
		t.Errorf("version extra: %s\nwant exit 2", r)
	}
}

// TestShellCompletionCompletesCommandsFlagsAndContexts checks what every
// completion script asks orgctl (its hidden __complete command), then bash
// itself completing with the generated script.
func TestShellCompletionCompletesCommandsFlagsAndContexts(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	c := &cli{t: t, env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config", "PATH=" + os.Getenv("PATH")}}
	c.mustRun("context", "set", "prod", "--api", "https://api.example.com", "--issuer", "https://id.example.com/realms/prod", "--client-id", "orgctl")

	for shell, marks := range map[string][]string{
		"bash":       {"__start_orgctl", "complete -o default -F __start_orgctl orgctl"},
		"zsh":        {"#compdef orgctl", "__complete"},
		"fish":       {"complete -c orgctl", "__complete"},
		"powershell": {"Register-ArgumentCompleter", "__complete"},
	} {
		r := c.mustRun("completion", shell)
		for _, m := range marks {
			if !strings.Contains(r.stdout, m) {
				t.Errorf("completion %s lacks %q", shell, m)
			}
		}
	}
	if r := c.run("completion", "tcsh"); r.code != 2 || !strings.Contains(r.stderr, "bash, zsh, fish or powershell") {
		t.Errorf("completion tcsh: %s\nwant exit 2 naming the shells", r)
	}

	// What the scripts ask: the candidates, one a line (a tab before a
	// description), then ":" and cobra's directive.
	candidates := func(args ...string) []string {
		t.Helper()
		var out []string
		for line := range strings.Lines(c.mustRun(append([]string{"__complete"}, args...)...).stdout) {
			if !strings.HasPrefix(line, ":") {
				name, _, _ := strings.Cut(strings.TrimSpace(line), "\t")
				out = append(out, name)
			}
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"or"}, "orgs"},
		{[]string{"orgs", ""}, "create,list,get,update,delete"},
		{[]string{"orgs", "list", "--out"}, "--output"},
		{[]string{"-o", ""}, "table,json"},
		{[]string{"orgs", "list", "--context", ""}, "dev,prod"},
		{[]string{"context", "use", ""}, "dev,prod"},
		{[]string{"completion", ""}, "bash,zsh,fish,powershell"},
	} {
		if got := strings.Join(candidates(tc.args...), ","); got != tc.want {
			t.Errorf("__complete %q: %q, want %q", tc.args, got, tc.want)
		}
	}

	// bash itself, with the script as a user loads it. The script needs
	// the bash-completion package.
	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		testenv.Missing(t, "bash-completion", "run the tests with scripts/test, which installs Debian's package")
	}
	script := `source ` + bashCompletion + `
source <(orgctl completion bash)
try() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
  __start_orgctl orgctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
  local IFS=,; echo "${COMPREPLY[*]}"; }
try orgctl or
try orgctl envs w
try orgctl context delete p
`
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Env = append(c.env[:len(c.env):len(c.env)], "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if got := string(out); got != "orgs\nwatch\nprod\n" {
		t.Errorf("bash completed %q, want orgs, watch and prod", got)
	}
}

func TestContextListColumnsLineUpWithTheirHeader(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	c := &cli{t: t, env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config"}}
	c.mustRun("context", "set", "staging-eu-west", "--api", "https://api.staging.example.com", "--issuer", "https://id.example.com/realms/staging", "--client-id", "orgctl", "--use")
	c.mustRun("context", "set", "p", "--api", "https://p.example", "--issuer", "https://id.example.com/realms/p", "--client-id", "c")
	lines := strings.Split(strings.TrimSuffix(c.mustRun("context", "list").stdout, "\n"), "\n")
	header := lines[0]
	var starts []int // where each column's heading begins
	for _, h := range []string{"CURRENT", "NAME", "API", "ISSUER", "CLIENT ID"} {
		i := strings.Index(header, h)
		if i < 0 || (len(starts) > 0 && i <= starts[len(starts)-1]) {
			t.Fatalf("header %q lacks %s in its place", header, h)
		}
		starts = append(starts, i)
	}
	rows := map[string]bool{}
	for _, row := range lines[1:] {
		var cells []string
		for k, s := range starts {
			// Cut at the headings' columns, each cell must be whole.
			if len(row) <= s || s > 0 && row[s-1] != ' ' {
				t.Fatalf("row %q: no cell begins under column %d\n%s", row, s, strings.Join(lines, "\n"))
			}
			end := len(row)
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			cells = append(cells, strings.TrimSpace(row[s:end]))
		}
		rows[strings.Join(cells, "|")] = true
	}
	for _, want := range []string{
		"|dev|http://127.0.0.1:8080|http://127.0.0.1:8081/realms/dev|cli",
		"|p|https://p.example|https://id.example.com/realms/p|c",
		"*|staging-eu-west|https://api.staging.example.com|https://id.example.com/realms/staging|orgctl",
	} {
		if !rows[want] {
			t.Errorf("no row %q under the headings:\n%s", want, strings.Join(lines, "\n"))
		}
	}
}

// TestBlueprintsValidateHelpDescribesTheFormat checks that -h describes
// the document, and that its example is one the API finds valid.
func TestBlueprintsValidateHelpDescribesTheFormat(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st, "ORGCTL_CLIENT_ID=svc-admin", "ORGCTL_CLIENT_SECRET=dev-secret")
	help := c.mustRun("blueprints", "validate", "-h").stdout
	for _, w := range []string{"YAML or JSON", "name:", "services:", "image:", "ports:", "env:", "depends_on:", "resources:", "DNS label", "exit 1", "1 MiB"} {
		if !strings.Contains(help, w) {
			t.Errorf("blueprints validate -h does not say %q:\n%s", w, help)
		}
	}
	_, example, _ := strings.Cut(help, "holding one mapping:\n")
	example, _, _ = strings.Cut(example, "\nA DNS label")
	var doc strings.Builder
	for line := range strings.Lines(example) {
		line, _, _ = strings.Cut(line, "#")
		doc.WriteString(strings.TrimRight(strings.TrimPrefix(line, "  "), " \n") + "\n")
	}
	if r := c.runWithInput(doc.String(), "blueprints", "validate", "-"); r.code != 0 || r.stdout != "valid\n" {
		t.Errorf("the example of -h:\n%s\n%s", doc.String(), r)
	}
}
