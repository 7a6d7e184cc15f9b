package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The backend refuses to start without an audience, unless told to accept
// any, and names the flag.
func TestAudienceIsRequiredUnlessAnyIsAllowed(t *testing.T) {
	t.Setenv("ORGSVC_AUDIENCE", "")
	t.Setenv("ORGSVC_ALLOW_ANY_AUDIENCE", "")
	db := filepath.Join(t.TempDir(), "orgsvc.db")
	err := run([]string{"-issuer", "http://127.0.0.1:1/realms/x", "-database", db, "-log-format", "text"})
	if err == nil || !strings.Contains(err.Error(), "-audience (or ORGSVC_AUDIENCE) is required") {
		t.Fatalf("without -audience: %v", err)
	}
	err = run([]string{"-issuer", "http://127.0.0.1:1/realms/x", "-database", db, "-audience", "api", "-allow-any-audience", "-log-format", "text"})
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("with both: %v", err)
	}
}

// A watch poll that is not positive is refused, naming the flag, rather
// than taken for the default.
func TestWatchPollMustBePositive(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orgsvc.db")
	for _, v := range []string{"0s", "-1s"} {
		err := run([]string{"-issuer", "http://127.0.0.1:1/realms/x", "-database", db, "-audience", "api", "-log-format", "text", "-watch-poll", v})
		if err == nil || !strings.Contains(err.Error(), "-watch-poll (or ORGSVC_WATCH_POLL) must be positive") {
			t.Fatalf("-watch-poll %s: %v", v, err)
		}
	}
}
