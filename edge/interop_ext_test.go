package edge_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// zitadelRoleClaim is where the zitadel-run provider puts roles: a top-level
// array, not one of Keycloak's places.
const zitadelRoleClaim = "roles"

// zitadelAccount is a service account of the zitadel provider: a client that
// may only use the client credentials grant and gets JWT access tokens.
type zitadelAccount struct {
	*storage.Client
	secret string
	roles  []string
}

func newZitadelAccount(id, secret string, roles ...string) zitadelAccount {
	return zitadelAccount{Client: storage.WebClient(id, secret), secret: secret, roles: roles}
}

func (zitadelAccount) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}

// AccessTokenType makes the provider sign a JWT instead of the opaque token
// the example clients get, which only the provider itself could read.
func (zitadelAccount) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

// zitadelStorage is zitadel's example in-memory storage (signing key, key
// set, everything else) with our service accounts: the example's one service
// user gets opaque tokens without roles, and its fields are unexported.
type zitadelStorage struct {
	*storage.Storage
	accounts map[string]zitadelAccount // read only once the provider serves
}

func (s *zitadelStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	a, ok := s.accounts[id]
	if !ok || a.secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return a, nil
}

func (s *zitadelStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if _, ok := s.accounts[id]; !ok {
		return nil, errors.New("unknown client")
	}
	// The API is in aud, as a real provider's project or audience setting puts it.
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{id, devissuer.DefaultAudience}, Scopes: scopes}, nil
}

// GetPrivateClaimsFromScopes is how the provider asks for the extra claims of
// a JWT access token.
func (s *zitadelStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	if a, ok := s.accounts[clientID]; ok {
		return map[string]any{zitadelRoleClaim: a.roles}, nil
	}
	return s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
}

// startZitadel runs zitadel's OpenID Provider on a loopback port until the
// test ends and returns its issuer URL.
func startZitadel(t *testing.T, accounts ...zitadelAccount) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	st := &zitadelStorage{
		Storage:  storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{}),
		accounts: map[string]zitadelAccount{},
	}
	for _, a := range accounts {
		st.accounts[a.GetID()] = a
	}
	cfg := &op.Config{}
	if _, err := rand.Read(cfg.CryptoKey[:]); err != nil {
		t.Fatal(err)
	}
	// The issuer is plain http on loopback; zitadel refuses a non-https
	// issuer unless insecure issuers are allowed.
	provider, err := op.NewProvider(cfg, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: provider, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("zitadel provider: %v", err)
		}
	})
	return issuer
}

// zitadelToken gets an access token with the client credentials grant from
// the token endpoint the provider's discovery names, and checks that it is an
// RS256 JWT carrying roles where the provider puts them and nowhere else.
func zitadelToken(t *testing.T, issuer string, a zitadelAccount) string {
	t.Helper()
	ctx := context.WithValue(ctxT(t), oauth2.HTTPClient, testkit.HTTP1Client)
	res, err := testkit.HTTP1Client.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var discovery struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(res.Body).Decode(&discovery); err != nil || discovery.Issuer != issuer || discovery.TokenEndpoint == "" {
		t.Fatalf("discovery %+v, %v", discovery, err)
	}
	cc := clientcredentials.Config{ClientID: a.GetID(), ClientSecret: a.secret, TokenURL: discovery.TokenEndpoint, AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("token for %s: %v", a.GetID(), err)
	}
	parsed, err := jwt.ParseSigned(tok.AccessToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("access token of %s is no RS256 JWT: %v", a.GetID(), err)
	}
	var claims map[string]any
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	var roles []string
	raw, _ := claims[zitadelRoleClaim].([]any)
	for _, r := range raw {
		s, _ := r.(string)
		roles = append(roles, s)
	}
	_, keycloak := claims["realm_access"]
	if !slices.Equal(roles, a.roles) || keycloak || claims["iss"] != issuer {
		t.Fatalf("claims %v, want iss %s and %s %v only", claims, issuer, zitadelRoleClaim, a.roles)
	}
	return tok.AccessToken
}

// startBehindZitadel starts a backend and an edge that both verify tokens
// from issuer, each reading roles from its own claim paths (nil: the
// Keycloak defaults), and returns the edge's URL.
func startBehindZitadel(t *testing.T, issuer string, backendRoles, edgeRoles []string) string {
	t.Helper()
	// orgsvc.Run offers no role claims setting; a backend built as a library
	// can get them through its Authenticator.
	auth, err := identity.NewVerifier(identity.Config{IssuerURL: issuer, Audience: devissuer.DefaultAudience, RoleClaims: backendRoles})
	if err != nil {
		t.Fatal(err)
	}
	be := testkit.StartBackend(t, testkit.SQLite, issuer, orgsvc.Config{Auth: auth})
	cfg := testkit.EdgeConfig(t, be.URL, issuer)
	if edgeRoles != nil {
		cfg.OIDC.RoleClaims = edgeRoles
	}
	return testkit.StartEdge(t, cfg).URL
}

var (
	zitadelViewer = newZitadelAccount("reporting-job", "viewer-secret", "svc-viewer")
	zitadelAdmin  = newZitadelAccount("provisioner", "admin-secret", "svc-admin", "team-infra")
)

func TestTokensFromAnotherOpenIDProviderAreAcceptedAndRolesMapped(t *testing.T) {
	t.Parallel()
	issuer := startZitadel(t, zitadelViewer, zitadelAdmin)
	edgeURL := startBehindZitadel(t, issuer, []string{zitadelRoleClaim}, []string{zitadelRoleClaim})
	ctx := ctxT(t)
	admin := testkit.NewClients(edgeURL, testkit.GRPC, zitadelToken(t, issuer, zitadelAdmin))
	viewer := testkit.NewClients(edgeURL, testkit.GRPC, zitadelToken(t, issuer, zitadelViewer))

	org, err := admin.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "made-by-zitadel-admin", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatalf("svc-admin token from zitadel: %v", err)
	}

	// The backend mapped the role too: a person sees only the organizations
	// they belong to, a service account sees them all.
	list, err := viewer.Org.ListOrganizations(ctx, req(&svcv1.ListOrganizationsRequest{}))
	if err != nil {
		t.Fatalf("svc-viewer token from zitadel: %v", err)
	}
	if !slices.ContainsFunc(list.Msg.Organizations, func(o *svcv1.OrganizationSummary) bool { return o.Id == org.Msg.Id }) {
		t.Fatalf("svc-viewer lists %v, want the organization %s", list.Msg.Organizations, org.Msg.Id)
	}

	_, err = viewer.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "made-by-zitadel-viewer", BillingEmail: "a@b.example"}))
	ce := wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", "edge")
	if got := errorInfo(t, ce).Metadata["required_roles"]; got != "svc-admin" {
		t.Fatalf("required_roles %q", got)
	}
}

func TestAnotherProvidersRolesAreIgnoredUnderKeycloakRoleClaims(t *testing.T) {
	t.Parallel()
	issuer := startZitadel(t, zitadelViewer)
	cases := []struct {
		name         string
		backendRoles []string
		check        func(t *testing.T, err error)
	}{
		{
			// The backend still reads the provider's roles and refuses: the
			// refusal is its own, so the edge let the call through.
			name:         "BackendReadsTheProvidersRoles",
			backendRoles: []string{zitadelRoleClaim},
			check: func(t *testing.T, err error) {
				wantError(t, err, connect.CodePermissionDenied, "MISSING_ROLE", "svc.v1.OrganizationService")
			},
		},
		{
			// Both on the defaults, as orgsvc.Run deploys the backend: the
			// token is a person's, and a person may create an organization.
			name: "BackendOnKeycloakRoleClaims",
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Fatalf("a person creating an organization: %v", err)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			edgeURL := startBehindZitadel(t, issuer, c.backendRoles, nil)
			viewer := testkit.NewClients(edgeURL, testkit.GRPC, zitadelToken(t, issuer, zitadelViewer))
			_, err := viewer.Org.CreateOrganization(ctxT(t), req(&svcv1.CreateOrganizationRequest{Name: "viewer-as-person", BillingEmail: "a@b.example"}))
			var ce *connect.Error
			if errors.As(err, &ce) && ce.Code() == connect.CodePermissionDenied && errorInfo(t, ce).Domain == "edge" {
				t.Fatalf("the edge mapped roles it was not told about: %v", err)
			}
			c.check(t, err)
		})
	}
}
