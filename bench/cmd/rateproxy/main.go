// Command rateproxy is the benchmark's yardstick for Redis: a bare
// httputil.ReverseProxy (HTTP/1.1 upstream, as the peer harness's httputil
// target) that makes one go-redis/redis_rate Allow of a single GCRA limit
// per call before forwarding it. What Redis spends per call of this target
// is what one redis_rate Allow costs; the edge's limit step is measured
// against it (docs/benchmarks.md). The limit is keyed by the caller's
// Authorization header, so that calls spread over as many keys as the
// edge's subjects, and is too large to refuse anything.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18086", "listen address")
	upstream := flag.String("upstream", "http://127.0.0.1:18082", "upstream URL")
	redisAddr := flag.String("redis", "127.0.0.1:16379", "redis-server address")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, PoolSize: 256, MinIdleConns: 16})
	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		res, err := limiter.Allow(r.Context(), "rate:"+hex.EncodeToString(sum[:8]), limit)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if res.Allowed == 0 {
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		}
		rp.ServeHTTP(w, r)
	})
	log.Printf("rateproxy listening on %s -> %s, redis %s", *addr, u, *redisAddr)
	log.Fatal(http.ListenAndServe(*addr, h))
}
