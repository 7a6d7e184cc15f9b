package authn_test

import (
	"context"
	"testing"
)

// BenchmarkCachedToken is the steady state: a token seen before, no
// signature verified.
func BenchmarkCachedToken(b *testing.B) {
	iss, a := setup(b)
	tok, _ := iss.Issuer.TokenFor("alice")
	h := bearer(tok)
	if _, err := a.Authenticate(context.Background(), h); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(context.Background(), h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifySignature is a cache miss: the RS256 verification the cache saves.
func BenchmarkVerifySignature(b *testing.B) {
	iss, a := setup(b)
	tok, _ := iss.Issuer.TokenFor("alice")
	h := bearer(tok)
	b.ReportAllocs()
	for b.Loop() {
		a.Forget(h)
		if _, err := a.Authenticate(context.Background(), h); err != nil {
			b.Fatal(err)
		}
	}
}
