package authn_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/identity"
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

// BenchmarkTokenCacheEntry is what one cached token holds in memory (the
// capacity plan's edge memory per active subject): the heap in use after
// verifying 2,000 tokens of distinct development subjects, less before,
// per token. Each round fills a fresh authenticator; b.N only repeats it.
func BenchmarkTokenCacheEntry(b *testing.B) {
	const n = 2000
	iss, v := startIssuer(b, identity.Config{})
	headers := make([]http.Header, n)
	for i := range headers {
		tok, err := iss.Issuer.TokenFor(fmt.Sprintf("enterprise-capacity-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		headers[i] = bearer(tok)
	}
	// The verifier's keys, fetched once, are not the cache's.
	if _, err := authn.New(v, authn.Options{CacheSize: 1}).Authenticate(context.Background(), headers[0]); err != nil {
		b.Fatal(err)
	}
	var perEntry float64
	for b.Loop() {
		a := authn.New(v, authn.Options{CacheSize: n, ClockSkew: 30 * time.Second})
		before := heapInUse()
		for _, h := range headers {
			if _, err := a.Authenticate(context.Background(), h); err != nil {
				b.Fatal(err)
			}
		}
		perEntry = float64(heapInUse()-before) / n
		runtime.KeepAlive(a)
	}
	b.ReportMetric(perEntry, "B/entry")
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
