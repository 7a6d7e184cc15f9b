package devissuer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"
)

// Paths under the issuer URL, as Keycloak serves them.
const (
	discoveryPath = "/.well-known/openid-configuration"
	certsPath     = "/protocol/openid-connect/certs"
	tokenPath     = "/protocol/openid-connect/token"
)

// Issuer is a development OIDC issuer. It is an http.Handler serving, under
// the path of its issuer URL, the discovery document, the JWKS, the token
// endpoint, and the device authorization endpoint with its approval page;
// every other path is 404. Its methods are safe for concurrent use.
type Issuer struct {
	cfg     Config
	url     string
	clients map[string]Client
	users   map[string]User
	keys    keyring
	devices devices
	handler http.Handler
}

// New returns an issuer reachable at baseURL (scheme, host and optional path
// prefix, e.g. "http://127.0.0.1:8081"); its issuer URL is
// baseURL + "/realms/" + realm. It generates a fresh RSA-2048 signing key.
func New(baseURL string, cfg Config) (*Issuer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("devissuer: config: %w", err)
	}
	issuerURL, err := issuerURLOf(baseURL, cfg.Realm)
	if err != nil {
		return nil, fmt.Errorf("devissuer: base URL %q: %w", baseURL, err)
	}
	iss := &Issuer{
		cfg:     cfg,
		url:     issuerURL.String(),
		clients: make(map[string]Client, len(cfg.Clients)),
		users:   make(map[string]User, len(cfg.Users)),
	}
	for _, c := range cfg.Clients {
		iss.clients[c.ID] = c
	}
	for _, u := range cfg.Users {
		iss.users[u.Username] = u
	}
	if _, err := iss.keys.rotate(); err != nil {
		return nil, fmt.Errorf("devissuer: %w", err)
	}

	p := issuerURL.Path
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+p+discoveryPath, iss.serveDiscovery)
	mux.HandleFunc("GET "+p+certsPath, iss.serveCerts)
	mux.HandleFunc("POST "+p+tokenPath, iss.serveToken)
	mux.HandleFunc("POST "+p+deviceAuthPath, iss.serveDeviceAuthorization)
	mux.HandleFunc("GET "+p+devicePagePath, iss.serveDevicePage)
	mux.HandleFunc("POST "+p+devicePagePath, iss.serveDeviceDecision)
	iss.handler = mux
	if cfg.AllowAnyOrigin {
		iss.handler = cors.New(cors.Options{
			AllowedMethods: []string{http.MethodGet, http.MethodPost},
			AllowedHeaders: []string{"Content-Type", "Authorization"},
		}).Handler(mux)
	}
	return iss, nil
}

// issuerURLOf checks baseURL and appends the realm's path to it.
func issuerURLOf(baseURL, realm string) (*url.URL, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("want an absolute http or https URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, errors.New("want no user info, query or fragment")
	}
	prefix := strings.TrimSuffix(u.Path, "/")
	if strings.HasSuffix(prefix, "/realms/"+realm) {
		return nil, errors.New("pass the base URL: the issuer URL adds /realms/" + realm)
	}
	for _, seg := range strings.Split(prefix, "/")[1:] {
		if !isPathSafe(seg) {
			return nil, fmt.Errorf("path segment %q: use letters, digits, '.', '_' and '-' only", seg)
		}
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: prefix + "/realms/" + realm}, nil
}

// URL returns the issuer URL: the iss claim, and what go-oidc's NewProvider takes.
func (iss *Issuer) URL() string { return iss.url }

// ServeHTTP serves the discovery document, the JWKS, the token endpoint and
// the device authorization grant's endpoint and page.
func (iss *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) { iss.handler.ServeHTTP(w, r) }

// KeyID returns the kid of the key that signs new tokens.
func (iss *Issuer) KeyID() string { return iss.keys.currentKID() }

// RotateKey generates a new RSA-2048 key that signs every token from now on.
// Older keys stay in the JWKS, so tokens they signed still verify, until
// [Issuer.RetireKey] drops them.
func (iss *Issuer) RotateKey() (kid string, err error) {
	kid, err = iss.keys.rotate()
	if err != nil {
		return "", fmt.Errorf("devissuer: %w", err)
	}
	return kid, nil
}

// RetireKey drops a key from the JWKS: tokens it signed stop verifying for a
// verifier that refreshes its keys. It refuses the key that signs new tokens
// and a kid that is not published.
func (iss *Issuer) RetireKey(kid string) error {
	if err := iss.keys.retire(kid); err != nil {
		return fmt.Errorf("devissuer: %w", err)
	}
	return nil
}

// Mint signs exactly the given claims, unchecked, with the current key (RS256,
// header kid and typ JWT). Tests use it for tokens the token endpoint never
// issues: expired, for another audience, with other roles or plans. Numeric
// dates must be Unix seconds (int64), not time.Time. [Issuer.ClaimsFor] gives a
// valid claim set to start from.
func (iss *Issuer) Mint(claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("devissuer: encode claims: %w", err)
	}
	tok, err := iss.keys.sign(payload)
	if err != nil {
		return "", fmt.Errorf("devissuer: %w", err)
	}
	return tok, nil
}

// MintTyped is [Issuer.Mint] with typ as the JOSE header's typ instead of
// JWT: "at+jwt" for an RFC 9068 access token, or the type of another kind of
// token (tests of a verifier that must refuse it).
func (iss *Issuer) MintTyped(typ string, claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("devissuer: encode claims: %w", err)
	}
	tok, err := iss.keys.signTyped(typ, payload)
	if err != nil {
		return "", fmt.Errorf("devissuer: %w", err)
	}
	return tok, nil
}

// ClaimsFor returns the claims of a fresh token for a user (by username, as
// the password grant would issue it to the first public client) or for a
// confidential client's service account (by its username,
// "service-account-<client id>"). The map is the caller's to change and pass
// to [Issuer.Mint].
func (iss *Issuer) ClaimsFor(username string) (map[string]any, error) {
	if id, ok := strings.CutPrefix(username, serviceAccountPrefix); ok {
		c, ok := iss.clients[id]
		if !ok || c.Public {
			return nil, fmt.Errorf("devissuer: no confidential client %q", id)
		}
		return iss.serviceAccountClaims(c), nil
	}
	u, ok := iss.user(username)
	if !ok {
		return nil, fmt.Errorf("devissuer: no user %q", username)
	}
	azp := ""
	for _, c := range iss.cfg.Clients {
		if c.Public {
			azp = c.ID
			break
		}
	}
	claims := iss.userClaims(u, azp)
	if azp == "" {
		delete(claims, "azp")
	}
	return claims, nil
}

// TokenFor returns a signed token for a user or service account, as
// [Issuer.ClaimsFor] describes, without a round trip through HTTP.
func (iss *Issuer) TokenFor(username string) (string, error) {
	claims, err := iss.ClaimsFor(username)
	if err != nil {
		return "", err
	}
	return iss.Mint(claims)
}

// user finds a configured user, or else a generated plan user.
func (iss *Issuer) user(username string) (User, bool) {
	username = strings.ToLower(username)
	if u, ok := iss.users[username]; ok {
		return u, true
	}
	if iss.cfg.DisablePlanUsers {
		return User{}, false
	}
	return planUser(username)
}

// discovery is the subset of OpenID Connect Discovery 1.0 this issuer serves.
type discovery struct {
	Issuer                   string   `json:"issuer"`
	TokenEndpoint            string   `json:"token_endpoint"`
	DeviceEndpoint           string   `json:"device_authorization_endpoint"`
	JWKSURI                  string   `json:"jwks_uri"`
	GrantTypesSupported      []string `json:"grant_types_supported"`
	ResponseTypesSupported   []string `json:"response_types_supported"`
	SubjectTypesSupported    []string `json:"subject_types_supported"`
	IDTokenSigningAlgs       []string `json:"id_token_signing_alg_values_supported"`
	TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported          []string `json:"scopes_supported"`
	ClaimsSupported          []string `json:"claims_supported"`
}

func (iss *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, discovery{
		Issuer:              iss.url,
		TokenEndpoint:       iss.url + tokenPath,
		DeviceEndpoint:      iss.url + deviceAuthPath,
		JWKSURI:             iss.url + certsPath,
		GrantTypesSupported: []string{grantClientCredentials, grantPassword, grantDeviceCode, grantRefreshToken},
		// There is no authorization endpoint: tokens come from the token
		// endpoint (the device grant's approval page is not one). The field
		// is required, so it says just that.
		ResponseTypesSupported:   []string{"token"},
		SubjectTypesSupported:    []string{"public"},
		IDTokenSigningAlgs:       []string{"RS256"},
		TokenEndpointAuthMethods: []string{"client_secret_post", "client_secret_basic"},
		ScopesSupported:          []string{"openid", "profile", "email"},
		ClaimsSupported:          claimsSupported,
	})
}

func (iss *Issuer) serveCerts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, iss.keys.jwks())
}

// writeJSON writes v as the whole response. Encoding cannot fail for the
// types this package writes.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
