package proxy

import "testing"

// The switches that decide which headers are forwarded name exactly the
// headers of the lists they stand for, and no other.
func TestHeaderSwitchesAgreeWithTheirLists(t *testing.T) {
	want := map[string]map[string]bool{"isHopByHop": {}, "dropped": {}, "notWritten": {}}
	for _, h := range hopByHop {
		want["isHopByHop"][h], want["dropped"][h], want["notWritten"][h] = true, true, true
	}
	// Forwarded and X-Forwarded-*, and the headers only the edge may set.
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"Idempotent-Replayed", "X-Edge-Subject", "X-Edge-Plan"} {
		want["dropped"][h] = true
	}
	for _, h := range []string{"Expect", "Content-Length", "Host"} {
		want["notWritten"][h] = true
	}
	names := []string{"Authorization", "Content-Type", "Via", "X-Request-Id", "Grpc-Timeout", "Connect-Timeout-Ms",
		"Cookie", "User-Agent", "Idempotency-Key", "connection", "CONNECTION", "X-Forwarded", "Te ", ""}
	for _, set := range want {
		for h := range set {
			names = append(names, h)
		}
	}
	for name, f := range map[string]func(string) bool{"isHopByHop": isHopByHop, "dropped": dropped, "notWritten": notWritten} {
		for _, h := range names {
			if got := f(h); got != want[name][h] {
				t.Errorf("%s(%q) = %v, want %v", name, h, got, want[name][h])
			}
		}
	}
}
