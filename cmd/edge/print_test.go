package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
)

func TestCheckConfigPrintShowsTheEffectiveConfigurationWithSecretsRedacted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte("upstream:\n  url: http://orgsvc:8082\noidc:\n  issuer_url: https://id.example.com/realms/x\n  audience: api\nredis:\n  timeout: 80ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGE_LISTEN_ADDR", ":18080")
	t.Setenv("EDGE_REDIS_ADDR", "redis.internal:6379")
	t.Setenv("EDGE_REDIS_PASSWORD", "hunter2-redis")
	t.Setenv("EDGE_REDIS_SENTINEL_PASSWORD", "hunter2-sentinel")
	for _, args := range [][]string{
		{"-check-config", "-print", file}, // as the documentation writes it
		{"-print", "-check-config", file},
		{"-check-config", file, "-print"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		printed := out.String()
		if strings.Contains(printed, "hunter2") {
			t.Fatalf("%q printed a secret:\n%s", args, printed)
		}
		// The output is the configuration, and loads back with the secrets
		// given again in their variables: the file's value, the variable's,
		// the defaults.
		got, err := config.LoadData("the printed configuration", out.Bytes(), secretsOnly)
		if err != nil {
			t.Fatalf("%q: the output does not load back: %v\n%s", args, err, printed)
		}
		if got.Redis.Timeout.String() != "80ms" || got.Listen.Addr != ":18080" || got.Redis.Addr != "redis.internal:6379" ||
			got.Redis.Password != "hunter2-redis" || got.Redis.Sentinel.Password != "hunter2-sentinel" ||
			got.Limits.Plans["free"].RequestsPerMinute != 60 || len(got.Operations) != len(config.DefaultOperations()) {
			t.Fatalf("%q printed:\n%s", args, printed)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-check-config", file}, &out); err != nil || out.String() != file+": ok\n" {
		t.Fatalf("without -print: %q, %v", out.String(), err)
	}
}

func TestVersionFlag(t *testing.T) {
	old := buildVersion
	buildVersion = "v1.2.3"
	defer func() { buildVersion = old }()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &out); err != nil || out.String() != "edge v1.2.3\n" {
		t.Fatalf("-version: %q, %v", out.String(), err)
	}
}

// A rediss:// address turns TLS on as surely as redis.tls.enabled does: the
// printed configuration says so, and loads back to the same connection.
func TestCheckConfigPrintSaysTLSIsOnForARedissAddress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte("upstream:\n  url: http://orgsvc:8082\noidc:\n  issuer_url: https://id.example.com/realms/x\n  audience: api\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"EDGE_REDIS_ADDR", "EDGE_REDIS_CLUSTER_ADDRS"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "rediss://redis.internal:6380")
			var out bytes.Buffer
			if err := run(context.Background(), []string{"-check-config", "-print", file}, &out); err != nil {
				t.Fatal(err)
			}
			got, err := config.LoadData("the printed configuration", out.Bytes(), noEnv)
			if err != nil {
				t.Fatalf("the output does not load back: %v\n%s", err, out.String())
			}
			if !got.Redis.TLS.Enabled {
				t.Fatalf("%s=rediss://… printed tls.enabled: false:\n%s", env, out.String())
			}
			if target, err := got.Redis.Target(); err != nil || !target.TLS {
				t.Fatalf("the printed configuration connects without TLS: %+v, %v", target, err)
			}
		})
	}
}

// noEnv is an environment without variables: what loads back is what was
// printed.
func noEnv(string) string { return "" }

// secretsOnly is an environment with the secrets alone: the printed
// configuration holds a placeholder for each, which does not load.
func secretsOnly(name string) string {
	switch name {
	case "EDGE_REDIS_PASSWORD", "EDGE_REDIS_SENTINEL_PASSWORD":
		return os.Getenv(name)
	}
	return ""
}
