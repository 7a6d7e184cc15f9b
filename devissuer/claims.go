package devissuer

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"time"

	"github.com/google/uuid"
)

// tokenScope is the scope of every token; requested scopes are ignored.
const tokenScope = "openid profile email"

// claimsSupported lists, for discovery, every claim a token may carry.
var claimsSupported = []string{
	"iss", "sub", "aud", "exp", "iat", "auth_time", "jti", "typ", "azp", "scope", "at_hash",
	"realm_access", "preferred_username", "email", "email_verified", "name", "plan",
}

// baseClaims are the claims every access token carries, Keycloak-like.
func (iss *Issuer) baseClaims(sub, azp, username string, roles []string) map[string]any {
	now := iss.cfg.Now()
	if roles == nil {
		roles = []string{} // "roles": [] rather than null, so a reader needs no special case
	}
	return map[string]any{
		"iss":                iss.url,
		"sub":                sub,
		"aud":                slices.Clone(iss.cfg.Audience),
		"iat":                now.Unix(),
		"exp":                now.Unix() + int64(iss.cfg.TokenTTL/time.Second),
		"jti":                uuid.NewString(),
		"typ":                "Bearer",
		"azp":                azp,
		"scope":              tokenScope,
		"realm_access":       map[string]any{"roles": slices.Clone(roles)},
		"preferred_username": username,
	}
}

// serviceAccountClaims are the claims of a token a confidential client gets
// for itself.
func (iss *Issuer) serviceAccountClaims(c Client) map[string]any {
	return iss.baseClaims(ServiceAccountSubject(iss.cfg.Realm, c.ID), c.ID, serviceAccountPrefix+c.ID, c.Roles)
}

// userClaims are the claims of a token that client azp gets for a person.
func (iss *Issuer) userClaims(u User, azp string) map[string]any {
	claims := iss.baseClaims(UserSubject(iss.cfg.Realm, u.Username), azp, u.Username, u.Roles)
	if u.Email != "" {
		claims["email"] = u.Email
		claims["email_verified"] = true
	}
	if u.Name != "" {
		claims["name"] = u.Name
	}
	if u.Plan != "" {
		claims["plan"] = u.Plan
	}
	return claims
}

// idTokenClaims are the claims of the ID token that comes with an access
// token, as Keycloak makes it: for the client (aud and azp are the client
// id, not the API), typ "ID", at_hash binding it to the access token, the
// person's profile claims, and no roles or plan (those mappers write to the
// access token only).
func idTokenClaims(access map[string]any, accessToken string) map[string]any {
	id := map[string]any{
		"aud":       access["azp"],
		"typ":       "ID",
		"jti":       uuid.NewString(),
		"auth_time": access["iat"],
		"at_hash":   atHash(accessToken),
	}
	for _, k := range []string{"iss", "sub", "iat", "exp", "azp", "preferred_username", "email", "email_verified", "name"} {
		if v, ok := access[k]; ok {
			id[k] = v
		}
	}
	return id
}

// atHash is OpenID Connect's at_hash for an RS256-signed ID token: the left
// half of the access token's SHA-256, base64url.
func atHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}
