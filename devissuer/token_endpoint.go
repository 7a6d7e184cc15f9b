package devissuer

import (
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// Grant types the token endpoint serves.
const (
	grantClientCredentials = "client_credentials"
	grantPassword          = "password"
	grantRefreshToken      = "refresh_token"
)

// maxTokenRequest bounds the body of a token request.
const maxTokenRequest = 64 << 10

// tokenResponse is Keycloak's token response. The scope is always openid,
// so an ID token comes with every access token; a refresh token comes with
// a person's tokens (password, device and refresh grants), not with a
// service account's, as in Keycloak.
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	IDToken          string `json:"id_token"`
	ExpiresIn        int64  `json:"expires_in"`
	RefreshToken     string `json:"refresh_token,omitempty"`
	RefreshExpiresIn int64  `json:"refresh_expires_in"`
	TokenType        string `json:"token_type"`
	NotBeforePolicy  int64  `json:"not-before-policy"`
	Scope            string `json:"scope"`
}

// serveToken is the token endpoint. It checks, in order: the request's
// shape, the grant type, the client, the client's right to the grant, and
// then what the grant presents: the user's password, the device code, or
// the refresh token.
func (iss *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	form, oerr := readTokenForm(w, r)
	if oerr != nil {
		oerr.write(w)
		return
	}
	grant := form.Get("grant_type")
	switch grant {
	case "":
		errInvalidRequest("Missing form parameter: grant_type").write(w)
		return
	case grantClientCredentials, grantPassword, grantDeviceCode, grantRefreshToken:
	default:
		(&oauthError{http.StatusBadRequest, "unsupported_grant_type", "Unsupported grant_type"}).write(w)
		return
	}

	client, basic, oerr := iss.authenticateClient(r, form)
	if oerr != nil {
		if basic && oerr.status == http.StatusUnauthorized {
			// RFC 6749 section 5.2: a failed Basic authentication says how to authenticate.
			w.Header().Set("WWW-Authenticate", `Basic realm="`+iss.cfg.Realm+`"`)
		}
		oerr.write(w)
		return
	}

	var (
		claims map[string]any
		person *User // the person the tokens are for; nil for a service account
	)
	switch grant {
	case grantClientCredentials:
		if client.Public {
			errUnauthorizedClient(http.StatusBadRequest, "Public client not allowed to retrieve service account").write(w)
			return
		}
		claims = iss.serviceAccountClaims(client)
	case grantPassword:
		if !client.Public {
			errUnauthorizedClient(http.StatusBadRequest, "Client not allowed for direct access grants").write(w)
			return
		}
		username, password := form.Get("username"), form.Get("password")
		if username == "" || password == "" {
			errInvalidRequest("Missing parameter: username and password are required").write(w)
			return
		}
		u, ok := iss.user(username)
		if !ok || !equalSecret(u.Password, password) {
			(&oauthError{http.StatusUnauthorized, "invalid_grant", "Invalid user credentials"}).write(w)
			return
		}
		person = &u
	case grantDeviceCode:
		if !client.Public {
			errUnauthorizedClient(http.StatusBadRequest, "Client is not allowed to initiate OAuth 2.0 Device Authorization Grant. The flow is disabled for the client.").write(w)
			return
		}
		code := form.Get("device_code")
		if code == "" {
			errInvalidRequest("Missing parameter: device_code").write(w)
			return
		}
		username, oerr := iss.devices.poll(code, client.ID, iss.cfg.Now())
		if oerr != nil {
			oerr.write(w)
			return
		}
		u, ok := iss.user(username)
		if !ok {
			(&oauthError{http.StatusBadRequest, "invalid_grant", "User not found"}).write(w)
			return
		}
		person = &u
	case grantRefreshToken:
		u, oerr := iss.redeemRefresh(form.Get("refresh_token"), client)
		if oerr != nil {
			oerr.write(w)
			return
		}
		person = &u
	}
	if person != nil {
		claims = iss.userClaims(*person, client.ID)
	}

	tok, err := iss.Mint(claims)
	var idTok, refresh string
	if err == nil {
		idTok, err = iss.Mint(idTokenClaims(claims, tok))
	}
	if err == nil && person != nil {
		refresh, err = iss.mintRefresh(*person, client.ID)
	}
	if err != nil {
		(&oauthError{http.StatusInternalServerError, "server_error", "could not sign the token"}).write(w)
		return
	}
	resp := tokenResponse{
		AccessToken: tok,
		IDToken:     idTok,
		ExpiresIn:   int64(iss.cfg.TokenTTL / time.Second),
		TokenType:   "Bearer",
		Scope:       tokenScope,
	}
	if refresh != "" {
		resp.RefreshToken, resp.RefreshExpiresIn = refresh, int64(iss.cfg.RefreshTokenTTL/time.Second)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// readTokenForm reads the form-encoded body, bounded, and refuses repeated
// parameters (RFC 6749 section 3.2). Query parameters are ignored.
func readTokenForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/x-www-form-urlencoded" {
		return nil, errInvalidRequest("Content-Type must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenRequest)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, errInvalidRequest("Request body larger than 64 KiB")
		}
		return nil, errInvalidRequest("Malformed form body")
	}
	for name, values := range r.PostForm {
		if len(values) > 1 {
			return nil, errInvalidRequest("Parameter " + name + " given more than once")
		}
	}
	return r.PostForm, nil
}

// authenticateClient finds the client from HTTP Basic or the form, and checks
// a confidential client's secret. A public client is known by its id alone.
// basic reports whether the client used HTTP Basic.
func (iss *Issuer) authenticateClient(r *http.Request, form url.Values) (c Client, basic bool, _ *oauthError) {
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if r.Header.Get("Authorization") != "" {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return Client{}, false, errInvalidRequest("Authorization header must be Basic client credentials")
		}
		basic = true
		// RFC 6749 section 2.3.1: both parts are form-encoded before Basic encoding.
		var errID, errSecret error
		user, errID = url.QueryUnescape(user)
		pass, errSecret = url.QueryUnescape(pass)
		switch {
		case errID != nil || errSecret != nil:
			return Client{}, basic, errInvalidRequest("Malformed Basic client credentials")
		case secret != "":
			return Client{}, basic, errInvalidRequest("Client credentials given both in Authorization and in the body")
		case id != "" && id != user:
			return Client{}, basic, errInvalidRequest("client_id differs from the Authorization header")
		}
		id, secret = user, pass
	}
	if id == "" {
		return Client{}, basic, errInvalidRequest("Missing parameter: client_id")
	}
	c, ok := iss.clients[id]
	if !ok || !c.Public && !equalSecret(c.Secret, secret) {
		return Client{}, basic, errUnauthorizedClient(http.StatusUnauthorized, "Invalid client or Invalid client credentials")
	}
	return c, basic, nil
}

// equalSecret compares in constant time, out of habit: this issuer's secrets
// are public, but its code gets copied.
func equalSecret(want, got string) bool {
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
