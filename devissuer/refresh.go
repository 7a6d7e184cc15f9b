package devissuer

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// refreshTokenType is the typ claim of a refresh token, as Keycloak writes it.
const refreshTokenType = "Refresh"

// refreshClaims are what a refresh token carries. The token is a JWT signed
// like an access token, so that the issuer keeps no state: whoever holds it
// may get new tokens for that person through that client until it expires.
// Clients must treat it as opaque, as they must Keycloak's.
type refreshClaims struct {
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Sub      string `json:"sub"`
	Typ      string `json:"typ"`
	Azp      string `json:"azp"`
	Iat      int64  `json:"iat"`
	Exp      int64  `json:"exp"`
	Jti      string `json:"jti"`
	Scope    string `json:"scope"`
	Username string `json:"preferred_username"`
}

// mintRefresh returns a new refresh token for the person through client azp.
func (iss *Issuer) mintRefresh(u User, azp string) (string, error) {
	now := iss.cfg.Now()
	payload, err := json.Marshal(refreshClaims{
		Iss:      iss.url,
		Aud:      iss.url,
		Sub:      UserSubject(iss.cfg.Realm, u.Username),
		Typ:      refreshTokenType,
		Azp:      azp,
		Iat:      now.Unix(),
		Exp:      now.Unix() + int64(iss.cfg.RefreshTokenTTL/time.Second),
		Jti:      uuid.NewString(),
		Scope:    tokenScope,
		Username: u.Username,
	})
	if err != nil {
		return "", fmt.Errorf("encode refresh claims: %w", err)
	}
	return iss.keys.sign(payload)
}

// redeemRefresh checks a refresh token presented by client and returns the
// person it was issued for. Every failure is invalid_grant, as in Keycloak.
func (iss *Issuer) redeemRefresh(token string, client Client) (User, *oauthError) {
	invalid := func(why string) *oauthError {
		return &oauthError{400, "invalid_grant", why}
	}
	if token == "" {
		return User{}, errInvalidRequest("Missing parameter: refresh_token")
	}
	payload, err := iss.keys.verify(token)
	if err != nil {
		return User{}, invalid("Invalid refresh token")
	}
	var c refreshClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return User{}, invalid("Invalid refresh token")
	}
	switch {
	case c.Typ != refreshTokenType, c.Iss != iss.url, c.Aud != iss.url:
		return User{}, invalid("Invalid refresh token")
	case c.Azp != client.ID:
		return User{}, invalid("Invalid refresh token. Token client and authorized client don't match")
	case iss.cfg.Now().Unix() >= c.Exp:
		return User{}, invalid("Token is not active")
	}
	u, ok := iss.user(c.Username)
	if !ok || UserSubject(iss.cfg.Realm, u.Username) != c.Sub {
		return User{}, invalid("User not found")
	}
	return u, nil
}
