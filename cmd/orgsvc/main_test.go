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
