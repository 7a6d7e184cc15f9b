package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestThePrintedConfigurationDoesNotStartWithItsPlaceholderForASecret:
// `edge -check-config -print` writes REDACTED for each password; a file
// saved from it is refused, by -check-config and at start, with an error
// that names the field and where the real secret goes, unless the
// variables give the secrets again. A variable set to the placeholder is
// refused too, naming the variable.
func TestThePrintedConfigurationDoesNotStartWithItsPlaceholderForASecret(t *testing.T) {
	t.Parallel()
	bin := buildEdge(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(file, []byte("upstream:\n  url: http://orgsvc:8082\noidc:\n  issuer_url: https://id.example.com/realms/x\n  audience: api\nredis:\n  addr: redis.internal:6379\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"EDGE_REDIS_PASSWORD=hunter2-redis", "EDGE_REDIS_SENTINEL_PASSWORD=hunter2-sentinel"}
	printed, stderr, err := runEdge(t, bin, edgeEnv(secrets...), "-check-config", "-print", file)
	if err != nil || strings.Contains(printed, "hunter2") || !strings.Contains(printed, "password: REDACTED") {
		t.Fatalf("-check-config -print: %v\n%s\n%s", err, printed, stderr)
	}
	saved := filepath.Join(dir, "printed.yaml")
	if err := os.WriteFile(saved, []byte(printed), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"-check-config", saved}, {"-config", saved}} {
		stdout, stderr, err := runEdge(t, bin, edgeEnv(), args...)
		if err == nil {
			t.Fatalf("%q accepted the printed file with its placeholders; stdout:\n%s", args, stdout)
		}
		for _, want := range []string{
			`redis.password: "REDACTED" is the placeholder ` + "`edge -check-config -print`" + ` writes for a secret, not the secret: set the real one, preferably in EDGE_REDIS_PASSWORD`,
			`redis.sentinel.password: "REDACTED" is the placeholder`,
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%q: stderr does not say %q:\n%s", args, want, stderr)
			}
		}
	}

	// The secrets from their variables, as a deployment gives them: the
	// printed file is the configuration it was printed from.
	if stdout, stderr, err := runEdge(t, bin, edgeEnv(secrets...), "-check-config", saved); err != nil || stdout != saved+": ok\n" {
		t.Errorf("the printed file with the secrets in their variables: %v\n%s%s", err, stdout, stderr)
	}

	_, stderr, err = runEdge(t, bin, edgeEnv("EDGE_REDIS_PASSWORD=REDACTED"), "-check-config", file)
	if err == nil || !strings.Contains(stderr, `redis.password: "REDACTED" is the placeholder`) || !strings.Contains(stderr, "(set by EDGE_REDIS_PASSWORD)") {
		t.Errorf("EDGE_REDIS_PASSWORD=REDACTED: %v\n%s", err, stderr)
	}
}
