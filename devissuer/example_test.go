package devissuer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/orgedge/edge/devissuer"
)

// A service account gets a token and a resource server verifies it with
// go-oidc, as the edge does.
func Example() {
	ctx := context.Background()
	srv, err := devissuer.Start("127.0.0.1:0", devissuer.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	// Any OAuth 2.0 client library gets one; here golang.org/x/oauth2.
	cc := clientcredentials.Config{
		ClientID:     "svc-viewer",
		ClientSecret: devissuer.DevClientSecret,
		TokenURL:     srv.URL() + "/protocol/openid-connect/token",
		AuthStyle:    oauth2.AuthStyleInParams,
	}
	t, err := cc.Token(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok := t.AccessToken
	provider, err := oidc.NewProvider(ctx, srv.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: "api"}).Verify(ctx, tok)
	if err != nil {
		fmt.Println(err)
		return
	}
	var claims struct {
		Username    string `json:"preferred_username"`
		RealmAccess struct {
			Roles []string `json:"roles"`
		} `json:"realm_access"`
	}
	if err := idt.Claims(&claims); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(claims.Username, claims.RealmAccess.Roles)
	// Output: service-account-svc-viewer [svc-viewer]
}

// A test makes a token the token endpoint would never issue: here, one that
// expired an hour ago.
func ExampleIssuer_Mint() {
	iss, err := devissuer.New("http://127.0.0.1:8081", devissuer.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	claims, err := iss.ClaimsFor("alice")
	if err != nil {
		fmt.Println(err)
		return
	}
	claims["exp"] = time.Now().Add(-time.Hour).Unix()
	tok, err := iss.Mint(claims)
	fmt.Println(tok != "", err)
	// Output: true <nil>
}
