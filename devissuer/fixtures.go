package devissuer

import (
	"strings"
	"time"

	"github.com/google/uuid"
)

// Defaults of [Config], and the credentials of the development fixtures. These
// values are a public contract: docs and outside checks print and use them.
const (
	DefaultRealm    = "dev"
	DefaultAudience = "api"
	DefaultTokenTTL = 10 * time.Minute
	// DefaultRefreshTokenTTL is Keycloak's default SSO Session Idle.
	DefaultRefreshTokenTTL = 30 * time.Minute
	// DefaultDeviceCodeTTL and DefaultDevicePollInterval are Keycloak's
	// defaults for the device authorization grant.
	DefaultDeviceCodeTTL      = 10 * time.Minute
	DefaultDevicePollInterval = 5 * time.Second

	// DevClientSecret is the secret of every confidential fixture client.
	DevClientSecret = "dev-secret"
	// DevPublicClient is the public fixture client for the password grant
	// and the device authorization grant (the command-line client's login).
	DevPublicClient = "cli"

	// PlanUserPassword is the password of every generated load-test user:
	// unless [Config.DisablePlanUsers] is set, any username "free-<suffix>",
	// "pro-<suffix>" or "enterprise-<suffix>" (suffix of a-z, 0-9, '.', '_',
	// '-'; whole username at most 64 characters) logs in with this password as
	// a person on that plan, with email "<username>@example.com".
	PlanUserPassword = "dev"
)

// serviceAccountPrefix makes a client's service-account username, as in Keycloak.
const serviceAccountPrefix = "service-account-"

// DevClients returns the fixture clients: the confidential service-account
// clients svc-admin, svc-env-manager and svc-viewer, each with secret
// [DevClientSecret] and the realm role of its own name, and the public client
// [DevPublicClient].
func DevClients() []Client {
	return []Client{
		{ID: "svc-admin", Secret: DevClientSecret, Roles: []string{"svc-admin"}},
		{ID: "svc-env-manager", Secret: DevClientSecret, Roles: []string{"svc-env-manager"}},
		{ID: "svc-viewer", Secret: DevClientSecret, Roles: []string{"svc-viewer"}},
		{ID: DevPublicClient, Public: true},
	}
}

// DevUsers returns the fixture users: alice, bob and carol, each with their
// username as password, on the free, pro and enterprise plans, without realm
// roles.
func DevUsers() []User {
	return []User{
		{Username: "alice", Password: "alice", Email: "alice@example.com", Name: "Alice", Plan: "free"},
		{Username: "bob", Password: "bob", Email: "bob@example.com", Name: "Bob", Plan: "pro"},
		{Username: "carol", Password: "carol", Email: "carol@example.com", Name: "Carol", Plan: "enterprise"},
	}
}

// DefaultConfig returns the zero Config with every default written out, for a
// caller who wants to start from the fixtures and change a few things.
func DefaultConfig() Config {
	return Config{
		Realm:              DefaultRealm,
		Audience:           []string{DefaultAudience},
		TokenTTL:           DefaultTokenTTL,
		RefreshTokenTTL:    DefaultRefreshTokenTTL,
		DeviceCodeTTL:      DefaultDeviceCodeTTL,
		DevicePollInterval: DefaultDevicePollInterval,
		Clients:            DevClients(),
		Users:              DevUsers(),
		Now:                time.Now,
	}
}

// subjectNamespace is the UUIDv5 namespace of every sub this package derives.
var subjectNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/orgedge/edge/devissuer"))

// UserSubject returns the sub claim of the user's tokens in the realm. It
// depends on nothing else, so it is the same across restarts and instances.
func UserSubject(realm, username string) string {
	return uuid.NewSHA1(subjectNamespace, []byte(realm+"/user:"+strings.ToLower(username))).String()
}

// ServiceAccountSubject returns the sub claim of the tokens of the client's
// service account in the realm; like [UserSubject], it is stable.
func ServiceAccountSubject(realm, clientID string) string {
	return uuid.NewSHA1(subjectNamespace, []byte(realm+"/client:"+clientID)).String()
}

// planUser returns the generated load-test user of that name, if it is one.
func planUser(username string) (User, bool) {
	plan, suffix, ok := strings.Cut(username, "-")
	if !ok || suffix == "" || len(username) > 64 {
		return User{}, false
	}
	switch plan {
	case "free", "pro", "enterprise":
	default:
		return User{}, false
	}
	for _, r := range suffix {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return User{}, false
		}
	}
	return User{
		Username: username,
		Password: PlanUserPassword,
		Email:    username + "@example.com",
		Name:     username,
		Plan:     plan,
	}, true
}
