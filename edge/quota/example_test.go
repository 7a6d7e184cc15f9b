package quota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/quota"
)

// redisForExample starts an in-memory Redis; in production: your Redis or
// Redis Cluster.
func redisForExample() (*redis.Client, func()) {
	store := miniredis.NewMiniRedis()
	if err := store.Start(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr(), ContextTimeoutEnabled: true})
	return rdb, func() { _ = rdb.Close(); store.Close() }
}

// A WatchEnvironment stream holds a lease while it is open.
func ExampleStreams_Acquire() {
	rdb, stop := redisForExample()
	defer stop()
	streams := quota.NewStreams(rdb, quota.Options{LeasePeriod: 30 * time.Second, Timeout: time.Second}) // production: 50ms

	lease, err := streams.Acquire(context.Background(), "user-1", quota.DefaultMaxStreams)
	switch {
	case errors.Is(err, quota.ErrStreamLimit):
		fmt.Println("resource_exhausted", quota.ReasonStreamLimit)
		return
	case errors.Is(err, quota.ErrUnavailable):
		fmt.Println("apply the Redis outage policy")
		return
	}
	defer lease.Release()
	fmt.Println("lease held; serve the stream")
	// Output: lease held; serve the stream
}

// CreateEnvironment reserves quota before it is forwarded; the backend's
// answer confirms or rolls back; DeleteEnvironment releases.
func ExampleEnvironments_Reserve() {
	rdb, stop := redisForExample()
	defer stop()
	envs := quota.NewEnvironments(rdb, quota.Options{Timeout: time.Second}) // production: 50ms
	limits := config.Default().Limits
	ctx := context.Background()

	// The free plan's quotas (0: unlimited).
	free := quota.Quota{ConcurrentEnvironments: 2, EnvironmentsPerMonth: 10, VCPUHoursPerMonth: 100, MemoryGBHoursPerMonth: 200}
	res, err := envs.Reserve(ctx, "user-1", free, quota.Size(limits.EnvironmentSize))
	var qe *quota.QuotaError
	if errors.As(err, &qe) {
		fmt.Println("resource_exhausted", qe.Reason, qe.Description)
		return
	}
	if err != nil {
		return // outage policy
	}
	defer func() { _ = res.Rollback(ctx) }() // no-op once confirmed

	// … forward CreateEnvironment; on success, with the id it answered:
	_ = res.Confirm(ctx, "env-1", time.Now())
	u, _ := envs.Usage(ctx, "user-1")
	fmt.Println("running:", u.Environments, "created this month:", u.Created)

	// Later, when DeleteEnvironment succeeded (whoever deleted it):
	_ = envs.Release(ctx, "env-1", time.Now())
	u, _ = envs.Usage(ctx, "user-1")
	fmt.Println("running:", u.Environments, "created this month:", u.Created)
	// Output:
	// running: 1 created this month: 1
	// running: 0 created this month: 1
}
