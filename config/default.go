package config

import "time"

// Default returns the shipped configuration: every default named in the
// field comments, and DefaultOperations as the operation table. It leaves
// Upstream.URL and OIDC.IssuerURL empty: they have no sensible default, so
// Default alone does not validate. Each call returns a new value.
func Default() *Config {
	return &Config{
		Listen: Listen{
			Addr:              "127.0.0.1:8080",
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 * KiB,
			ShutdownGrace:     30 * time.Second,
		},
		Admin: Admin{
			Addr: "127.0.0.1:9090",
		},
		Upstream: Upstream{
			DialTimeout: 2 * time.Second,
		},
		OIDC: OIDC{
			ClockSkew: 30 * time.Second,
			// Keycloak's realm roles and the roles of the client the token
			// was issued to; identity.DefaultRoleClaims holds the same.
			RoleClaims:     []string{"realm_access.roles", "resource_access.${azp}.roles"},
			PlanClaim:      "plan",
			TokenCacheSize: 100_000,
			HTTPTimeout:    5 * time.Second,
		},
		Requests: Requests{
			MaxBodyBytes:     4 * MiB,
			MaxUnaryTimeout:  30 * time.Second,
			MaxStreamTimeout: time.Hour,
		},
		Redis: Redis{
			Timeout: 50 * time.Millisecond,
		},
		Operations: DefaultOperations(),
		Log: Log{
			Format: "json",
			Level:  "info",
		},
	}
}
