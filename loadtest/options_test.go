package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func parse(args ...string) (*Options, error) {
	return parseFlags(args, io.Discard, func(string) string { return "" })
}

func TestDefaultsAreAGentleConformanceRunAgainstTheDevelopmentStack(t *testing.T) {
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if o.Scenario != Conformance || o.Duration != 20*time.Second || o.Protocol != Connect || o.Overload != 2 ||
		len(o.Edges) != 1 || o.Edges[0] != "http://127.0.0.1:8080" || o.Issuer != "http://127.0.0.1:8081/realms/dev" ||
		o.ClientID != "cli" || o.Password != "dev" {
		t.Fatalf("defaults: %+v", o)
	}
	if len(o.Admins) != 1 || o.Admins[0] != "http://127.0.0.1:9090" || o.Thresholds != (Thresholds{MinAchievedRate: 0.95}) {
		t.Fatalf("admin %v, thresholds %+v: want the development edge's admin listener, no error, 95%% of the planned calls", o.Admins, o.Thresholds)
	}
	if o, err := parse("-edge", "http://10.0.0.1:8080"); err != nil || len(o.Admins) != 0 {
		t.Fatalf("another edge: admin %v (%v), want none", o.Admins, err)
	}
	want := []PlanCount{{"free", 2}, {"pro", 1}, {"enterprise", 1}}
	if len(o.Subjects) != 3 || o.Subjects[0] != want[0] || o.Subjects[1] != want[1] || o.Subjects[2] != want[2] {
		t.Fatalf("subjects %v, want %v", o.Subjects, want)
	}
}

func TestFlagsThatDoNotFitAreRefusedWithAReason(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "soak"}, `-scenario "soak"`},
		{[]string{"-protocol", "http2"}, "unknown protocol"},
		{[]string{"-edge", "127.0.0.1:8080"}, "want an http:// or https:// URL"},
		{[]string{"-edge", "http://127.0.0.1:8080,ftp://x"}, `-edge "ftp://x"`},
		{[]string{"-duration", "100ms"}, "-duration"},
		{[]string{"-rate", "10"}, "-rate and -concurrency apply to -scenario overhead"},
		{[]string{"-scenario", "overhead"}, "needs -backend"},
		{[]string{"-scenario", "overhead", "-backend", "http://127.0.0.1:8082", "-rate", "10", "-concurrency", "2"}, "exclude each other"},
		{[]string{"-scenario", "overhead", "-backend", "http://127.0.0.1:8082", "-rate", "-1"}, "-rate -1"},
		{[]string{"-backend", "http://127.0.0.1:8082"}, "-backend applies to -scenario overhead only"},
		{[]string{"-overload", "1"}, "-overload 1"},
		{[]string{"-keys", "5"}, "-keys and -duplicates apply to -scenario idempotency"},
		{[]string{"-scenario", "idempotency", "-duplicates", "1"}, "-duplicates 1"},
		{[]string{"-subjects", "gold=1"}, `plan "gold" is not in -plans`},
		{[]string{"-subjects", "free=0"}, "no subject"},
		{[]string{"-plans", "tiny=60/10/0"}, ""}, // subjects default to one per plan
		{[]string{"-plans", "tiny=60/10/0", "-subjects", "free=1"}, `plan "free" is not in -plans`},
		{[]string{"-users", "alice"}, "-users needs -password"},
		{[]string{"-client-id", "svc-admin"}, "-client-id needs -client-secret"},
		{[]string{"-users", "alice", "-password", "x", "-subjects", "free=1"}, "-subjects counts"},
		{[]string{"-users", "alice=gold", "-password", "x"}, `plan "gold"`},
		{[]string{"-password", "x"}, "go with -users or -client-id"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-edge", "http://127.0.0.1:8080,http://127.0.0.1:8090", "-admin", "http://127.0.0.1:9090"}, "-admin names 1 admin listeners for 2 edges"},
		{[]string{"-admin", "127.0.0.1:9090"}, `-admin "127.0.0.1:9090"`},
		{[]string{"-max-overhead-p99", "5ms"}, "apply to -scenario overhead only"},
		{[]string{"-max-error-rate", "2"}, "-max-error-rate 2"},
		{[]string{"-min-achieved", "-0.5"}, "-min-achieved -0.5"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parse(tc.args...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestSecretsComeFromTheEnvironmentAndNamedSubjectsCarryPlans(t *testing.T) {
	env := map[string]string{"LOADTEST_CLIENT_SECRET": "s3cret", "LOADTEST_PASSWORD": "pw"}
	o, err := parseFlags([]string{"-client-id", "svc-admin=enterprise,svc-viewer"}, io.Discard, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.ClientSecret != "s3cret" || len(o.Clients) != 2 || o.Clients[0] != (Named{"svc-admin", "enterprise"}) || o.Clients[1] != (Named{"svc-viewer", ""}) {
		t.Fatalf("%+v", o)
	}
	o, err = parseFlags([]string{"-users", "alice=free,bob", "-client-id", "cli2"}, io.Discard, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "pw" || o.ClientID != "cli2" || len(o.Users) != 2 {
		t.Fatalf("%+v", o)
	}
}

func TestHelpDocumentsEveryScenarioAndFlag(t *testing.T) {
	var out strings.Builder
	_, err := parseFlags([]string{"-h"}, &out, func(string) string { return "" })
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"conformance", "operations", "idempotency", "overhead", "-edge", "-backend", "-protocol", "-subjects",
		"-plans", "-rate", "-concurrency", "-duration", "-issuer", "-client-id", "-client-secret", "-users", "-password", "-out",
		"Retry-After", "tolerance", "loadtest-results"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h does not mention %s", want)
		}
	}
}

func TestOverheadPicksEnoughSubjectsThatTheEdgeRefusesNothing(t *testing.T) {
	o, err := parse("-scenario", "overhead", "-backend", "http://127.0.0.1:8082", "-rate", "1000", "-duration", "60s")
	if err != nil {
		t.Fatal(err)
	}
	got := overheadSubjects(o)
	// 30,000 edge calls; an enterprise subject allows 2000 + 1000 over a minute.
	if len(got) != 1 || got[0].Plan != "enterprise" || got[0].Count != 13 {
		t.Fatalf("overheadSubjects = %v", got)
	}
}

func TestExitStatusIsTwoForAUsageErrorAndZeroForHelp(t *testing.T) {
	var stderr strings.Builder
	if got := mainExit([]string{"-scenario", "soak"}, io.Discard, &stderr); got != 2 || !strings.Contains(stderr.String(), "-scenario") {
		t.Fatalf("exit %d, stderr %q", got, stderr.String())
	}
	if got := mainExit([]string{"-h"}, io.Discard, io.Discard); got != 0 {
		t.Fatalf("-h: exit %d", got)
	}
}

// TestREADMEAndHelpSayTheSame: every flag the README's load-testing section
// names is one of the tool's, the section names the flags that decide a
// verdict, and both give the same exit statuses.
func TestREADMEAndHelpSayTheSame(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(readme)[strings.Index(string(readme), "## Load testing"):], "## Load testing")
	if !ok {
		t.Fatal("README.md has no Load testing section")
	}
	section = section[:strings.Index(section, "\n## ")]
	var help strings.Builder
	if _, err := parseFlags([]string{"-h"}, &help, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	// The edge's own flags aside (go run ./cmd/edge -dev).
	ours := regexp.MustCompile("`go run ./cmd/edge[^`]*`").ReplaceAllString(section, "")
	for _, name := range regexp.MustCompile("[ `(]-([a-z][a-z0-9-]+)").FindAllStringSubmatch(ours, -1) {
		if !strings.Contains(help.String(), "\n  -"+name[1]+" ") && !strings.Contains(help.String(), "\n  -"+name[1]+"\n") {
			t.Errorf("README names -%s, which -h does not list", name[1])
		}
	}
	for _, f := range []string{"-admin", "-max-error-rate", "-max-p99", "-max-overhead-p50", "-max-overhead-p99", "-min-achieved", "-out"} {
		if !strings.Contains(section, "`"+f+"`") {
			t.Errorf("README's Load testing section does not name %s", f)
		}
	}
	for _, status := range []struct{ readme, help string }{
		{"0 PASS", "0\non PASS"}, {"1 FAIL", "1 on FAIL"}, {"2 usage error", "2 on a usage error"}, {"3 INCONCLUSIVE", "3\non INCONCLUSIVE"},
	} {
		if !strings.Contains(section, status.readme) || !strings.Contains(help.String(), status.help) {
			t.Errorf("exit status %q (README) / %q (-h): not in both", status.readme, status.help)
		}
	}
	if exitStatus(Pass) != 0 || exitStatus(Fail) != 1 || exitUsage != 2 || exitStatus(Inconclusive) != 3 {
		t.Error("the exit statuses are not the documented ones")
	}
}
