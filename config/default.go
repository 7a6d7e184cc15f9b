package config

import "time"

// unlimitedQuotas bound nothing.
var unlimitedQuotas = Quotas{
	ConcurrentEnvironments: Unlimited, EnvironmentsPerMonth: Unlimited,
	VCPUHoursPerMonth: Unlimited, MemoryGBHoursPerMonth: Unlimited,
}

// Default returns the shipped configuration: every default named in the
// field comments, and DefaultOperations as the operation table. It leaves
// Upstream.URL, OIDC.IssuerURL, OIDC.Audience and Redis.Addr empty: they
// have no sensible default, so Default alone does not validate. Each call returns a new value.
func Default() *Config {
	return &Config{
		Listen: Listen{
			Addr:              "127.0.0.1:8080",
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 * KiB,
			ShutdownGrace:     30 * time.Second,

			HTTP2IdleTimeout:         5 * time.Second,
			MaxConnectionsPerAddress: 256,
			ClientAddress:            ClientAddress{WarnSubjectsPerAddress: 50},
			MaxResetsPerConnection:   100,
			MaxEarlyCalls:            5,
			MaxEarlyCallHold:         time.Minute,
			MaxHeldCallsPerSubject:   1024,
			MaxCallsInFlight:         4096,
		},
		Admin: Admin{
			Addr: "127.0.0.1:9090",
		},
		Upstream: Upstream{
			DialTimeout:      2 * time.Second,
			ResolveInterval:  10 * time.Second,
			MaxConnectionAge: 5 * time.Minute,
			EjectFor:         10 * time.Second,
			HealthCheck: HealthCheck{
				Interval:           5 * time.Second,
				Timeout:            time.Second,
				UnhealthyThreshold: 2,
				HealthyThreshold:   2,
			},
		},
		OIDC: OIDC{
			ClockSkew: 30 * time.Second,
			// Keycloak's realm roles and the client roles of the API's own
			// client; identity.DefaultRoleClaims holds the same.
			RoleClaims:            []string{"realm_access.roles", "resource_access.${audience}.roles"},
			PlanClaim:             "plan",
			TokenCacheSize:        100_000,
			HTTPTimeout:           5 * time.Second,
			KeyRefetchInterval:    10 * time.Second,
			RefusedTokenCacheSize: 10_000,
			FailureLimit:          FailureLimit{PerMinute: 60, Burst: 20},
		},
		Requests: Requests{
			MaxBodyBytes:         4 * MiB,
			MaxUnaryTimeout:      30 * time.Second,
			MaxStreamTimeout:     time.Hour,
			StreamWriteTimeout:   30 * time.Second,
			BodyTimeout:          10 * time.Second,
			StreamMessageTimeout: 10 * time.Second,
		},
		Redis: Redis{
			// No address: a production edge must name its shared Redis
			// (or a local one, explicitly), never reach 127.0.0.1:6379
			// unasked, where limits would hold per replica.
			KeyPrefix: "edge:",
			Timeout:   50 * time.Millisecond,
			// A dial and handshake take a round trip or three; a second
			// covers a loaded host without hiding a dead Redis for long.
			PoolTimeout:  time.Second,
			PoolSize:     256,
			MinIdleConns: 32,
		},
		Idempotency: Idempotency{
			TTL:               24 * time.Hour,
			Lease:             time.Minute,
			MaxResponseBytes:  MiB,
			MaxKeysPerSubject: 10000,
			OnRedisFailure:    FailClosed,
		},
		Limits: Limits{
			DefaultPlan: "free",
			// The specification's tables. Pro and Enterprise environment
			// and compute quotas are "unlimited" or per subscription:
			// Unlimited here, set per subject in subject_quotas.
			Plans: map[string]Plan{
				"free": {
					RequestsPerMinute: 60,
					RequestsPerDay:    10_000,
					Burst:             100,
					Quotas: Quotas{
						ConcurrentEnvironments: 2,
						EnvironmentsPerMonth:   10,
						VCPUHoursPerMonth:      100,
						MemoryGBHoursPerMonth:  200,
					},
				},
				"pro": {
					RequestsPerMinute: 300,
					RequestsPerDay:    100_000,
					Burst:             500,
					Quotas:            unlimitedQuotas,
				},
				"enterprise": {
					RequestsPerMinute: 1000,
					RequestsPerDay:    Unlimited, // no daily cap
					Burst:             2000,
					Quotas:            unlimitedQuotas,
				},
			},
			StreamLease:       30 * time.Second,
			ReconcileInterval: time.Minute,
			EnvironmentSize:   EnvironmentSize{VCPUs: 2, MemoryGB: 4},
			OnRedisFailure:    FailOpen,
			LocalShare:        0.5,
		},
		Operations: DefaultOperations(),
		CORS: CORS{
			MaxAge:         2 * time.Hour,
			PreflightLimit: PreflightLimit{PerMinute: 600, Burst: 100},
		},
		Log: Log{
			Format:      "json",
			Level:       "info",
			SampleOK:    0.1,
			BufferBytes: 4 * MiB,

			CanceledPerSecond: 10,
		},
	}
}
