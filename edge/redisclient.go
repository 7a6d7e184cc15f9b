package edge

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/config"
)

// newRedisClient connects to the Redis that cfg names: one server, a
// Cluster, or the master that Sentinel points to (go-redis' failover
// client, which follows a failover on its own), over TLS when asked, as an
// ACL user when a username is set. It contacts nothing yet.
func newRedisClient(cfg config.Redis) (redis.UniversalClient, error) {
	target, err := cfg.Target()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("redis.tls: %w", err)
	}
	opts := &redis.UniversalOptions{
		Addrs: target.Addrs, IsClusterMode: target.Mode == config.ModeCluster,
		Username: cfg.Username, Password: cfg.Password,
		TLSConfig:   tlsConfig,
		DialTimeout: time.Second, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		// Every call carries its own short deadline; a failed one is not
		// retried: the limit step's breaker decides what happens next.
		ContextTimeoutEnabled: true,
		// Waiting for a pooled connection counts against each call's short
		// deadline: a pool large enough for a burst of new clients keeps a
		// spike of traffic from looking like a Redis outage.
		PoolSize:     256,
		MinIdleConns: 16,
		MaxRetries:   -1,
	}
	if target.Mode == config.ModeSentinel {
		opts.MasterName = cfg.Sentinel.MasterName
		opts.SentinelUsername, opts.SentinelPassword = cfg.Sentinel.Username, cfg.Sentinel.Password
	}
	return redis.NewUniversalClient(opts), nil
}
