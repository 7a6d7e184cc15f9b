package testkit

import (
	"context"
	"net/http"
	"net/url"

	"github.com/orgedge/edge/devissuer"
)

// ClientCredentials returns a token for a confidential client's service
// account, the secret sent in the form (client_secret_post).
func ClientCredentials(ctx context.Context, hc *http.Client, issuerURL, clientID, secret string) (string, error) {
	return devissuer.FetchToken(ctx, hc, issuerURL, url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {clientID},
		"client_secret": {secret},
	})
}
