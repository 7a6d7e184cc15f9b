package main_test

import (
	"strings"
	"testing"
)

// The conventions of gh, kubectl and doctl, through the built command.

func TestGlobalFlagsGoBeforeOrAfterTheCommandInLongAndShortForms(t *testing.T) {
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
