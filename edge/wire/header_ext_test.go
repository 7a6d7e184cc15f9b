package wire_test

import (
	"net/http"
	"testing"

	"github.com/orgedge/edge/edge/wire"
)

// FirstValue of a canonical key answers as http.Header.Get: present (added
// under a lower-case name, stored canonical), repeated, or absent.
func TestFirstValueIsGetForACanonicalKey(t *testing.T) {
	h := http.Header{}
	h.Add("content-type", "application/json")
	h.Add("Grpc-Status", "0")
	h.Add("Grpc-Status", "13")
	for _, key := range []string{"Content-Type", "Grpc-Status", "X-Request-Id"} {
		if got, want := wire.FirstValue(h[key]), h.Get(key); got != want {
			t.Errorf("FirstValue(h[%q]) = %q, h.Get says %q", key, got, want)
		}
	}
}
