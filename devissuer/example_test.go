package devissuer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

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

	tok, err := devissuer.ClientCredentials(ctx, nil, srv.URL(), "svc-viewer", devissuer.DevClientSecret)
	if err != nil {
		fmt.Println(err)
		return
	}
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

// A refusal says what Keycloak would say.
func ExampleTokenError() {
	srv, err := devissuer.Start("127.0.0.1:0", devissuer.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	_, err = devissuer.Password(context.Background(), nil, srv.URL(), devissuer.DevPublicClient, "alice", "wrong")
	if tokErr, ok := errors.AsType[*devissuer.TokenError](err); ok {
		fmt.Println(tokErr.Status, tokErr.Code)
	}
	// Output: 401 invalid_grant
}
