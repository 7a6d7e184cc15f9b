package devissuer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Config says which realm, clients and users an [Issuer] serves. Each zero
// field takes its default, so the zero Config serves the development fixtures
// of [DefaultConfig].
type Config struct {
	// Realm names the realm in every path and in the issuer URL. Default
	// [DefaultRealm]. Letters, digits, '.', '_' and '-' only.
	Realm string
	// Audience is the aud claim of every token the token endpoint issues.
	// Default [DefaultAudience] alone.
	Audience []string
	// TokenTTL is the lifetime of an access token, in whole seconds. Default
	// [DefaultTokenTTL].
	TokenTTL time.Duration
	// Clients that may ask for tokens. Empty means [DevClients].
	Clients []Client
	// Users who may log in with the password grant. Empty means [DevUsers].
	Users []User
	// RefreshTokenTTL is the lifetime of a refresh token (issued with the
	// password and device grants, and anew by each refresh). Default
	// [DefaultRefreshTokenTTL].
	RefreshTokenTTL time.Duration
	// DeviceCodeTTL is how long a device code of the device authorization
	// grant waits for a person to approve it. Default [DefaultDeviceCodeTTL].
	DeviceCodeTTL time.Duration
	// DevicePollInterval is the polling interval, in whole seconds, that the
	// device authorization endpoint gives clients. Default
	// [DefaultDevicePollInterval].
	DevicePollInterval time.Duration
	// DisablePlanUsers turns off the generated load-test users (see
	// [PlanUserPassword]); only the listed Users can then log in.
	DisablePlanUsers bool
	// AllowAnyOrigin lets a page on any origin call the issuer from a
	// browser (CORS): the discovery document, the JWKS, the token and
	// device authorization endpoints, as Keycloak's "Web origins: +" does
	// for a client. The development mode sets it, so that a page can fetch
	// a token.
	AllowAnyOrigin bool
	// Now is the clock for iat and exp. Default time.Now.
	Now func() time.Time
}

// Client is an OAuth client of the realm.
//
// A confidential client (Public false) has a service account: it gets tokens
// for itself with the client_credentials grant, authenticated by Secret, and
// cannot use the password or device grants. A public client (Public true)
// has no secret and gets tokens for people: with the password grant, or with
// the device authorization grant (RFC 8628) that a command-line client uses.
type Client struct {
	ID     string
	Secret string
	Public bool
	// Roles are the realm roles of the client's service account; ignored for a
	// public client.
	Roles []string
}

// User is a person who logs in with the password grant or approves a device
// on the device grant's approval page. Username is matched
// case-insensitively, as Keycloak does, and must be given in lower case.
// Empty Email, Name or Plan leave that claim out of the user's tokens.
type User struct {
	Username string
	Password string
	Email    string
	Name     string
	Plan     string
	// Roles are the user's realm roles (realm_access.roles).
	Roles []string
}

// withDefaults returns a copy of cfg with defaults filled in and every slice
// copied, so that the caller may change cfg afterwards, or checks it.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Realm == "" {
		cfg.Realm = DefaultRealm
	}
	if !isPathSafe(cfg.Realm) {
		return cfg, fmt.Errorf("realm %q: use letters, digits, '.', '_' and '-' only", cfg.Realm)
	}
	if len(cfg.Audience) == 0 {
		cfg.Audience = []string{DefaultAudience}
	}
	cfg.Audience = slices.Clone(cfg.Audience)
	if slices.Contains(cfg.Audience, "") {
		return cfg, errors.New("audience: empty entry")
	}
	for _, d := range []struct {
		v        *time.Duration
		def      time.Duration
		name     string
		wholeSec bool
	}{
		{&cfg.TokenTTL, DefaultTokenTTL, "token TTL", false},
		{&cfg.RefreshTokenTTL, DefaultRefreshTokenTTL, "refresh token TTL", false},
		{&cfg.DeviceCodeTTL, DefaultDeviceCodeTTL, "device code TTL", false},
		{&cfg.DevicePollInterval, DefaultDevicePollInterval, "device poll interval", true},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Second {
			return cfg, fmt.Errorf("%s %v: must be at least 1s", d.name, *d.v)
		}
		if d.wholeSec && *d.v%time.Second != 0 {
			return cfg, fmt.Errorf("%s %v: must be whole seconds", d.name, *d.v)
		}
	}
	if len(cfg.Clients) == 0 {
		cfg.Clients = DevClients()
	}
	if len(cfg.Users) == 0 {
		cfg.Users = DevUsers()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}

	clients := make([]Client, len(cfg.Clients))
	seen := make(map[string]bool)
	for i, c := range cfg.Clients {
		switch {
		case c.ID == "":
			return cfg, fmt.Errorf("clients[%d]: empty ID", i)
		case seen[c.ID]:
			return cfg, fmt.Errorf("client %q: listed twice", c.ID)
		case c.Public && c.Secret != "":
			return cfg, fmt.Errorf("client %q: a public client has no secret", c.ID)
		case !c.Public && c.Secret == "":
			return cfg, fmt.Errorf("client %q: a confidential client needs a secret", c.ID)
		}
		seen[c.ID] = true
		c.Roles = slices.Clone(c.Roles)
		clients[i] = c
	}
	cfg.Clients = clients

	users := make([]User, len(cfg.Users))
	clear(seen)
	for i, u := range cfg.Users {
		switch {
		case u.Username == "":
			return cfg, fmt.Errorf("users[%d]: empty username", i)
		case u.Username != strings.ToLower(u.Username):
			return cfg, fmt.Errorf("user %q: username must be lower case", u.Username)
		case strings.HasPrefix(u.Username, serviceAccountPrefix):
			return cfg, fmt.Errorf("user %q: %q is reserved for service accounts", u.Username, serviceAccountPrefix)
		case seen[u.Username]:
			return cfg, fmt.Errorf("user %q: listed twice", u.Username)
		case u.Password == "":
			return cfg, fmt.Errorf("user %q: empty password", u.Username)
		}
		seen[u.Username] = true
		u.Roles = slices.Clone(u.Roles)
		users[i] = u
	}
	cfg.Users = users
	return cfg, nil
}

// isPathSafe reports whether s can be one segment of a URL path as is, and of
// an http.ServeMux pattern.
func isPathSafe(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		ok := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
			r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}
