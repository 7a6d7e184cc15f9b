package testkit

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// Subject reads the sub claim of a JWT (unverified): the subject by which
// the edge counts the caller's limits and the backend records what it
// created.
func Subject(t testing.TB, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Sub string }
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Sub == "" {
		t.Fatalf("no sub claim in %s (%v)", payload, err)
	}
	return claims.Sub
}
