package quota_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/quota"
)

// A WatchEnvironment stream holds a lease while it is open.
func ExampleStreams_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	streams := quota.NewStreams(rdb, quota.WithLeasePeriod(30*time.Second))

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
	// … serve the stream …
}

// CreateEnvironment reserves quota before it is forwarded; the backend's
// answer confirms or rolls back; DeleteEnvironment releases.
func ExampleEnvironments_Reserve() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	envs := quota.NewEnvironments(rdb)
	limits := config.Default().Limits
	ctx := context.Background()

	res, err := envs.Reserve(ctx, "user-1", quota.Quota(limits.QuotasFor("user-1", "free")), quota.Size(limits.EnvironmentSize))
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

	// Later, when DeleteEnvironment succeeded (whoever deleted it):
	_ = envs.Release(ctx, "env-1", time.Now())
}
