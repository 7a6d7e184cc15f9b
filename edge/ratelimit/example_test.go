package ratelimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/ratelimit"
)

// A CreateEnvironment call of a Free-plan subject: the plan's rate, the
// operation's rate and the daily cap, decided in one round trip.
func ExampleLimiter_Allow() {
	store := miniredis.NewMiniRedis() // in production: your Redis or Redis Cluster
	if err := store.Start(); err != nil {
		panic(err)
	}
	defer store.Close()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 []string{store.Addr()},
		ContextTimeoutEnabled: true, // lets the Limiter's deadline free the connection too
	})
	defer rdb.Close()
	limiter := ratelimit.New(rdb, ratelimit.Options{
		Timeout:        time.Second, // production: 50ms (config redis.timeout)
		OnRedisFailure: config.FailOpen,
		Logger:         slog.Default(),
	})
	d, err := limiter.Allow(context.Background(), ratelimit.Request{
		Subject: "key:3f9c",
		Limits: []ratelimit.Limit{
			{Name: "plan", Rate: 60, Period: time.Minute, Burst: 100},
			{Name: "op:CreateEnvironment", Rate: 10, Period: time.Minute, Burst: 10},
		},
		Daily: 10_000,
	})
	switch {
	case err != nil: // ErrUnavailable under FailClosed: answer unavailable
		fmt.Println("unavailable:", err)
	case !d.Allowed: // answer 429 with Retry-After
		fmt.Printf("refused by %s, retry in %v\n", d.Refused, d.RetryAfter.Round(time.Second))
	default:
		fmt.Println("allowed,", d.Today, "requests today")
	}
	// Output: allowed, 1 requests today
}
