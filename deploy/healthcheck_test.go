package deploy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBinariesCheckTheirOwnHealth checks the contract the images' health
// checks rely on (the images have no shell and no curl): `edge -healthcheck
// URL` and `orgsvc -healthcheck URL` exit 0 when URL answers 200, and
// non-zero when it answers anything else or nothing, within the health
// check's timeout, without configuration.
func TestBinariesCheckTheirOwnHealth(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.Error(w, "redis: not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	gone := "http://" + freeAddr(t) + "/readyz"

	for _, cmd := range []string{"cmd/edge", "cmd/orgsvc"} {
		t.Run(cmd, func(t *testing.T) {
			bin := buildBinary(t, cmd)
			for _, tc := range []struct {
				url     string
				healthy bool
			}{
				{srv.URL + "/readyz", true},
				{srv.URL + "/notready", false},
				{gone, false},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				c := exec.CommandContext(ctx, bin, "-healthcheck", tc.url)
				c.Env = []string{} // no EDGE_* or ORGSVC_*: a probe needs no configuration
				out, err := c.CombinedOutput()
				timedOut := ctx.Err() != nil
				cancel()
				var exit *exec.ExitError
				switch {
				case timedOut:
					t.Errorf("%s -healthcheck %s: still running after 3s (the health check's timeout)", cmd, tc.url)
				case tc.healthy && err != nil:
					t.Errorf("%s -healthcheck %s (200): %v: %s", cmd, tc.url, err, lastLine(out))
				case !tc.healthy && err == nil:
					t.Errorf("%s -healthcheck %s: exit 0, want non-zero (not healthy)", cmd, tc.url)
				case !tc.healthy && !errors.As(err, &exit):
					t.Errorf("%s -healthcheck %s: %v", cmd, tc.url, err)
				}
			}
		})
	}
}

// lastLine returns the last non-empty line of a command's output (the
// error, not the usage before it).
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
