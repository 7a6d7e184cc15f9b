package app

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/certfile"
)

// newRedisClient connects to the Redis that cfg names: one server, a
// Cluster, or the master that Sentinel points to (go-redis' failover
// client, which follows a failover on its own), over TLS when asked, as an
// ACL user when a username is set. It contacts nothing yet.
//
// A client certificate is read through a certfile.Pair, returned for the
// caller to reload when the files change: new connections then present
// the new certificate, open ones are left alone.
func newRedisClient(cfg config.Redis) (redis.UniversalClient, *certfile.Pair, error) {
	target, err := cfg.Target()
	if err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	tlsConfig, err := cfg.TLSConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("redis.tls: %w", err)
	}
	var clientCert *certfile.Pair
	if tlsConfig != nil && cfg.TLS.CertFile != "" {
		if clientCert, err = certfile.Load(cfg.TLS.CertFile, cfg.TLS.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("redis.tls: %w", err)
		}
		tlsConfig.Certificates = nil
		tlsConfig.GetClientCertificate = clientCert.GetClientCertificate
	}
	opts := &redis.UniversalOptions{
		Addrs: target.Addrs, IsClusterMode: target.Mode == config.ModeCluster,
		Username: cfg.Username, Password: cfg.Password,
		TLSConfig: tlsConfig,
		// Two bounds, kept apart. A command's round trip, once it holds a
		// connection, gets redis.timeout (socket deadlines on its write and
		// its read): a slow Redis is a failing one. Waiting for a
		// connection, dialling and its handshake included, gets
		// redis.pool_timeout: a fresh edge, or a burst past the idle
		// connections, is no Redis outage. A context deadline would bound
		// both at once, so the client ignores it for socket deadlines
		// (each call's context still ends waits and dials early).
		ContextTimeoutEnabled: false,
		ReadTimeout:           cfg.Timeout, WriteTimeout: cfg.Timeout,
		DialTimeout: cfg.PoolTimeout, PoolTimeout: cfg.PoolTimeout,
		// A refused dial is an answer: fail at once, the breaker decides.
		DialerRetries: 1,
		// No CLIENT SETINFO on each new connection: one round trip less
		// while a burst waits for its dials, and no error (counted as a
		// Redis failure) from servers without the command (Redis before
		// 7.2, the development mode's embedded store).
		DisableIdentity: true,
		// Nor CLIENT MAINT_NOTIFICATIONS (go-redis' default "auto" asks on
		// every connection until one refuses; only Redis Enterprise
		// answers): the same round trip and the same spurious errors.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		PoolSize:                 cfg.PoolSize,
		MinIdleConns:             cfg.MinIdleConns,
		// A failed call is not retried: the limit step's breaker decides
		// what happens next.
		MaxRetries: -1,
	}
	if target.Mode == config.ModeSentinel {
		opts.MasterName = cfg.Sentinel.MasterName
		opts.SentinelUsername, opts.SentinelPassword = cfg.Sentinel.Username, cfg.Sentinel.Password
	}
	return redis.NewUniversalClient(opts), clientCert, nil
}

// redisMode names how the edge reaches Redis (config.ModeStandalone,
// ModeSentinel, ModeCluster), for the operator page.
func redisMode(cfg config.Redis) string {
	t, err := cfg.Target()
	if err != nil {
		return ""
	}
	return t.Mode
}
