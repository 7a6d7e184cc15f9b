package main_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testkit"
)

func TestEveryOperationThroughTheEdgeAsTablesAndJSON(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	alice, bob := newCLI(t, st), newCLI(t, st)
	alice.login("alice", "alice")
	bob.login("bob", "bob")
	val := func(filter string, args ...string) string {
		t.Helper()
		return jq(t, filter, alice.mustRun(append(args, "-o", "json")...).stdout)
	}
	has := func(r result, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("orgctl output lacks %q:\n%s", w, r.stdout)
			}
		}
	}

	// Organizations.
	org := val(".id", "orgs", "create", "acme", "--display-name", "Acme", "--billing-email", "billing@acme.example")
	has(alice.mustRun("orgs", "get", org), "Acme", "billing@acme.example", "Plan", "free")
	has(alice.mustRun("orgs", "update", org, "--display-name", "Acme Inc"), "Acme Inc")
	if got := val(`.organizations[] | select(.id == "`+org+`") | "\(.role) \(.displayName)"`, "orgs", "list"); got != "admin Acme Inc" {
		t.Errorf("orgs list: %q", got)
	}

	// Projects.
	project := val(".id", "projects", "create", "web", "--org", org, "--description", "the site")
	has(alice.mustRun("projects", "update", project, "--description", "the new site"), "the new site")
	has(alice.mustRun("projects", "get", project), "web", "the new site")
	has(alice.mustRun("projects", "list", "--org", org), "NAME", "web")

	// Members and invitations: bob accepts by calling with his verified address.
	if got := val(".status", "members", "invite", "bob@example.com", "--org", org, "--role", "member"); got != "pending" {
		t.Errorf("invitation status %q", got)
	}
	has(alice.mustRun("members", "list", "--org", org, "--invitations"), "Invitations:", "bob@example.com", "pending")
	if got := jq(t, `.organizations | map(.name) | join(",")`, bob.mustRun("orgs", "list", "-o", "json").stdout); got != "acme" {
		t.Errorf("bob's organizations after the invitation: %q", got)
	}
	bobID := val(`.members[] | select(.email == "bob@example.com") | .userId`, "members", "list", "--org", org)
	if got := val(".role", "members", "update", bobID, "--org", org, "--role", "admin"); got != "admin" {
		t.Errorf("role after update %q", got)
	}
	has(alice.mustRun("members", "remove", bobID, "--org", org), "Removed member")
	if r := bob.run("orgs", "get", org); r.code != 5 || !strings.Contains(r.stderr, "not_found") || !strings.Contains(r.stderr, "ORGANIZATION_NOT_FOUND") {
		t.Errorf("bob after removal: %s\nwant exit 5 with the reason", r)
	}

	// Blueprints.
	has(alice.mustRun("blueprints", "search", "postgres"), "ID", "postgres-16")
	doc := filepath.Join(t.TempDir(), "stack.yaml")
	if err := os.WriteFile(doc, []byte("name: my-stack\nservices:\n  web:\n    image: nginx:1.27\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	has(alice.mustRun("blueprints", "validate", doc), "valid")
	bad := alice.runWithInput("name: Bad_Name\nservices: {}\n", "blueprints", "validate", "-")
	if bad.code != 1 || !strings.Contains(bad.stdout, "PATH") || !strings.Contains(bad.stdout, "name") {
		t.Errorf("invalid blueprint: %s\nwant exit 1 and the violations", bad)
	}

	// Environments, with pagination.
	env1 := val(".environment.id", "envs", "create", "db1", "--project", project, "--blueprint", "postgres-16")
	env2 := val(".environment.id", "envs", "create", "db2", "--project", project, "--blueprint", "redis-7")
	page := alice.mustRun("envs", "list", "--project", project, "--page-size", "1")
	// By id: a name as short as "db2" can be part of another environment's
	// id (env_...149db2).
	if !strings.Contains(page.stdout, env1) || strings.Contains(page.stdout, env2) || !strings.Contains(page.stderr, "--page-token") {
		t.Errorf("first page: %s", page)
	}
	next := val(".nextPageToken", "envs", "list", "--project", project, "--page-size", "1")
	if got := val(`.environments | map(.name) | join(",")`, "envs", "list", "--project", project, "--page-size", "1", "--page-token", next); got != "db2" {
		t.Errorf("second page %q", got)
	}
	if got := val(`"\(.environments | map(.id) | join(",")) [\(.nextPageToken)]"`, "envs", "list", "--project", project, "--page-size", "1", "--all"); got != env1+","+env2+" []" {
		t.Errorf("--all: %q", got)
	}
	has(alice.mustRun("envs", "get", env1), "db1", "postgres-16")
	if got := val(".environment.status", "envs", "delete", env1); got != "DELETED" {
		t.Errorf("deleted environment status %q", got)
	}

	// Usage.
	if got := val(`"\(.apiUsage.limits.requestsPerMinute) \(.resourceUsage.environments)"`, "usage"); got != "60 1" {
		t.Errorf("usage: %q", got)
	}
	has(alice.mustRun("usage"), "Rate limit", "60 requests per minute")

	// Deleting: refused while there are projects, the reason in plain words.
	r := alice.run("orgs", "delete", org)
	if r.code != 6 || !strings.Contains(r.stderr, "failed_precondition") || !strings.Contains(r.stderr, "ORGANIZATION_HAS_PROJECTS") {
		t.Errorf("delete with projects: %s\nwant exit 6 with the reason", r)
	}
	has(alice.mustRun("projects", "delete", project, "--force", "--yes"), "Deleted project")
	has(alice.mustRun("orgs", "delete", org), "Deleted organization")
	if r := alice.run("orgs", "get", org); r.code != 5 {
		t.Errorf("get after delete: %s\nwant exit 5", r)
	}
	if r := alice.run("orgs", "get"); r.code != 2 || !strings.Contains(r.stderr, "ORG_ID") {
		t.Errorf("missing argument: %s\nwant exit 2", r)
	}
	if r := alice.run("orgs", "create", "x", "--billing-email", "not-an-address"); r.code != 7 || !strings.Contains(r.stderr, "Field billing_email") {
		t.Errorf("invalid argument: %s\nwant exit 7 naming the field", r)
	}
}

func TestReplayedCreateWithTheSameIdempotencyKeyRunsOnceInTheBackend(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st)
	c.login("carol", "carol")
	args := []string{"orgs", "create", "once", "--billing-email", "b@once.example", "--idempotency-key", "deploy-42", "-o", "json"}
	first := jq(t, ".id", c.mustRun(args...).stdout)
	second := jq(t, ".id", c.mustRun(args...).stdout)
	if first == "" || first != second {
		t.Errorf("ids %q and %q, want the same", first, second)
	}
	samples := testkit.Scrape(t, st.backend.AdminURL+"/metrics")
	if n := samples.Sum("orgsvc_requests_total", "method", "CreateOrganization"); n != 1 {
		t.Errorf("the backend ran CreateOrganization %v times, want 1", n)
	}
	// Without the key, the same command is a second operation.
	if r := c.run("orgs", "create", "once", "--billing-email", "b@once.example"); r.code != 6 || !strings.Contains(r.stderr, "already_exists") {
		t.Errorf("without the key: %s\nwant exit 6 already_exists", r)
	}
}

func TestRateRefusalIsExplainedAndWaitedOutWithWait(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{edge: func(cfg *config.Config) {
		free := cfg.Limits.Plans["free"]
		// One call, then one every 10 s: the refused call and the --wait
		// call must both come before the next, which on a busy machine
		// (each run is a process of its own, built with -race) took over 3 s.
		free.RequestsPerMinute, free.Burst = 6, 1
		cfg.Limits.Plans["free"] = free
	}})
	c := newCLI(t, st)
	c.login("alice", "alice")
	c.mustRun("orgs", "list")
	r := c.run("orgs", "list")
	if r.code != 8 || !strings.Contains(r.stderr, "resource_exhausted") || !strings.Contains(r.stderr, "Retry after") {
		t.Fatalf("second call at once: %s\nwant exit 8 with the retry delay", r)
	}
	r = c.mustRun("orgs", "list", "--wait")
	if !strings.Contains(r.stderr, "waiting") || !strings.Contains(r.stderr, "retry 1 of 5") {
		t.Errorf("--wait: %s\nwant a note of the wait", r)
	}
	// A bound too small to wait is a refusal again.
	if r := c.run("orgs", "list", "--wait", "--max-wait", "10ms"); r.code != 8 || !strings.Contains(r.stderr, "--max-wait") {
		t.Errorf("--max-wait 10ms: %s\nwant exit 8 naming --max-wait", r)
	}
}

func TestWatchSeesProvisioningThenTheNextStatusAndEnds(t *testing.T) {
	t.Parallel()
	// PROVISIONING for 10 s: the watch must begin before it ends, a few
	// runs of the command after the environment is created (3 s was too
	// short on a busy machine).
	st := startStack(t, stackOptions{provisionDelay: 10 * time.Second})
	c := newCLI(t, st)
	c.login("carol", "carol")
	org := jq(t, ".id", c.mustRun("orgs", "create", "w", "--billing-email", "w@example.com", "-o", "json").stdout)
	project := jq(t, ".id", c.mustRun("projects", "create", "p", "--org", org, "-o", "json").stdout)
	env := jq(t, ".environment.id", c.mustRun("envs", "create", "e", "--project", project, "--blueprint", "postgres-16", "-o", "json").stdout)
	r := c.mustRun("envs", "watch", env, "-o", "json")
	if got := jq(t, `[., inputs] | map(.status) | join(",")`, r.stdout); got != "PROVISIONING,RUNNING" {
		t.Errorf("watch saw %q, want PROVISIONING,RUNNING", got)
	}
	if got := jq(t, `[., inputs] | map(.environment.id) | unique | join(",")`, r.stdout); got != env {
		t.Errorf("watch updates are for %q", got)
	}
}

func TestCtrlCEndsAWatchCleanlyWithExit130(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{provisionDelay: time.Hour})
	c := newCLI(t, st)
	c.login("carol", "carol")
	org := jq(t, ".id", c.mustRun("orgs", "create", "w", "--billing-email", "w@example.com", "-o", "json").stdout)
	project := jq(t, ".id", c.mustRun("projects", "create", "p", "--org", org, "-o", "json").stdout)
	env := jq(t, ".environment.id", c.mustRun("envs", "create", "e", "--project", project, "--blueprint", "postgres-16", "-o", "json").stdout)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "envs", "watch", env)
	cmd.Env = c.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), "PROVISIONING") {
		_ = cmd.Process.Kill()
		t.Fatalf("first line %q, want PROVISIONING", sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	err = cmd.Wait()
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("after Ctrl-C: %v, stderr %q; want exit 130 and 'interrupted'", err, stderr.String())
	}
}

func TestUsageShowsEachLimitBesideWhatIsUsedInHumanUnits(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{provisionDelay: 100 * time.Millisecond})
	c := newCLI(t, st)
	c.login("alice", "alice")
	org := jq(t, ".id", c.mustRun("orgs", "create", "u", "--billing-email", "u@example.com", "-o", "json").stdout)
	project := jq(t, ".id", c.mustRun("projects", "create", "p", "--org", org, "-o", "json").stdout)
	c.mustRun("envs", "create", "e", "--project", project, "--blueprint", "postgres-16")
	// The compute used grows with the environment's running time; wait
	// until the API counts some, as a person would look later.
	for start := time.Now(); jq(t, ".resourceUsage.vcpuHours", c.mustRun("usage", "-o", "json").stdout) == "0"; {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the API counts no compute for a running environment")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := c.mustRun("usage").stdout
	for _, want := range []string{
		`(?m)^Requests today \(UTC\) +([1-9]\d*) of 10000, the daily cap \((< 1|\d+)%\)$`,
		`(?m)^Requests this month +[1-9]\d*$`,
		`(?m)^Rate limit +60 requests per minute$`,
		// The free plan's quotas (config/edge.yaml): 2 at once, 10 a
		// month, 100 vCPU-hours, 200 GB-hours.
		`(?m)^Environments running +1 of 2, the quota \(50%\)$`,
		`(?m)^Environments per month +10 may be created$`,
		`(?m)^Compute this month +(\d+(\.\d{1,3})?|< 0\.001) of 100 vCPU-hours, the quota \((< 1|\d+)%\)$`,
		`(?m)^Memory this month +(\d+(\.\d{1,3})?|< 0\.001) of 200 GB-hours, the quota \((< 1|\d+)%\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("usage lacks %s:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`\d\.\d{4,}`).MatchString(out) {
		t.Errorf("usage shows a number of more than three decimals:\n%s", out)
	}
}
