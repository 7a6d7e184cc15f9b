package devissuer

// A client of a token endpoint, for tests and bench tools that log in to the development
// issuer (or any Keycloak-style one) the way a client does.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// TokenError is a token endpoint's refusal: the HTTP status and, when the
// body had Keycloak's error shape, its error and error_description.
type TokenError struct {
	Status      int
	Code        string
	Description string
}

func (e *TokenError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("devissuer: token endpoint: HTTP %d", e.Status)
	}
	return fmt.Sprintf("devissuer: token endpoint: HTTP %d %s: %s", e.Status, e.Code, e.Description)
}

// maxTokenResponse bounds what FetchToken reads of an answer.
const maxTokenResponse = 1 << 20

// FetchToken posts form to the token endpoint of the issuer at issuerURL (any
// Keycloak-style issuer, this one or Keycloak) and returns the access token.
// A refusal is a *[TokenError]. A nil hc means http.DefaultClient; ctx bounds
// the whole exchange.
func FetchToken(ctx context.Context, hc *http.Client, issuerURL string, form url.Values) (string, error) {
	t, err := FetchTokens(ctx, hc, issuerURL, form)
	return t.AccessToken, err
}

// Tokens are what a token endpoint answers: the access token, for the API,
// and the ID token, which tells the client who logged in and is for no API.
type Tokens struct {
	AccessToken string
	IDToken     string // empty when the issuer sent none
}

// FetchTokens is [FetchToken] returning the ID token too.
func FetchTokens(ctx context.Context, hc *http.Client, issuerURL string, form url.Values) (Tokens, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	endpoint := strings.TrimSuffix(issuerURL, "/") + "/protocol/openid-connect/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Tokens{}, fmt.Errorf("devissuer: token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return Tokens{}, fmt.Errorf("devissuer: token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return Tokens{}, fmt.Errorf("devissuer: read token response: %w", err)
	}

	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e) // a body of another shape leaves Code empty
		return Tokens{}, &TokenError{Status: resp.StatusCode, Code: e.Error, Description: e.Description}
	}
	var ok struct {
		AccessToken string `json:"access_token"`
		IDToken     string `json:"id_token"`
	}
	if err := json.Unmarshal(body, &ok); err != nil {
		return Tokens{}, fmt.Errorf("devissuer: decode token response: %w", err)
	}
	if ok.AccessToken == "" {
		return Tokens{}, fmt.Errorf("devissuer: token response without access_token")
	}
	return Tokens{AccessToken: ok.AccessToken, IDToken: ok.IDToken}, nil
}

// Password returns a token for a user through a public client, with the
// password grant.
func Password(ctx context.Context, hc *http.Client, issuerURL, clientID, username, password string) (string, error) {
	return FetchToken(ctx, hc, issuerURL, url.Values{
		"grant_type": {"password"},
		"client_id":  {clientID},
		"username":   {username},
		"password":   {password},
	})
}
