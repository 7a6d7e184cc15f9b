package edge_test

import (
	"net/url"
	"testing"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// startStackWithIssuer is startStack with an issuer of the test's own
// configuration.
func startStackWithIssuer(t *testing.T, icfg devissuer.Config, change func(*config.Config)) (*devissuer.Server, *stack) {
	t.Helper()
	iss, err := devissuer.Start("127.0.0.1:0", icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	var svc orgsvc.Config
	if change != nil {
		// The backend verifies tokens as the edge does.
		ecfg := config.Default()
		change(ecfg)
		v, err := identity.NewVerifier(identity.Config{
			IssuerURL: iss.URL(), Audience: devissuer.DefaultAudience, AzpAsAudience: ecfg.OIDC.AzpAsAudience,
		})
		if err != nil {
			t.Fatal(err)
		}
		svc.Auth = v
	}
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), svc)
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	if change != nil {
		change(cfg)
	}
	return iss, &stack{iss: iss.URL(), backend: be, edge: testkit.StartEdge(t, cfg)}
}

// mintFor signs a token for username with the issuer's key, changed by change.
func mintFor(t *testing.T, iss *devissuer.Server, username string, change func(map[string]any)) string {
	t.Helper()
	c, err := iss.Issuer.ClaimsFor(username)
	if err != nil {
		t.Fatal(err)
	}
	change(c)
	tok, err := iss.Issuer.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Tokens the issuer minted for another client of the realm are refused:
// one whose aud names another API, and one whose azp alone is the API's
// client (accepted only with oidc.azp_as_audience).
func TestTokensForAnotherAudienceAreRefused(t *testing.T) {
	t.Parallel()
	iss, st := startStackWithIssuer(t, devissuer.Config{Audience: []string{"billing"}}, nil)
	// A real token from the token endpoint, for the billing API.
	billing, err := devissuer.Password(ctxT(t), testkit.HTTP1Client, iss.URL(), devissuer.DevPublicClient, "bob", "bob")
	if err != nil {
		t.Fatal(err)
	}
	azpOnly := mintFor(t, iss, "bob", func(c map[string]any) { c["aud"] = []string{"account"}; c["azp"] = devissuer.DefaultAudience })
	for _, p := range []testkit.Protocol{testkit.HTTPJSON, testkit.GRPC} {
		for name, tok := range map[string]string{"aud billing": billing, "azp api": azpOnly} {
			t.Run(string(p)+"/"+name, func(t *testing.T) {
				_, err := testkit.NewClients(st.edge.URL, p, tok).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
				ce := wantError(t, err, connect.CodeUnauthenticated, "TOKEN_INVALID", "edge")
				if want := `token is not for audience "api"`; ce.Message() != want {
					t.Errorf("message %q, want %q", ce.Message(), want)
				}
			})
		}
	}
	// Where the operator accepts azp deliberately, the second passes.
	iss, st = startStackWithIssuer(t, devissuer.Config{}, func(c *config.Config) { c.OIDC.AzpAsAudience = true })
	azpOnly = mintFor(t, iss, "bob", func(c map[string]any) { c["aud"] = []string{"account"}; c["azp"] = devissuer.DefaultAudience })
	if _, err := testkit.NewClients(st.edge.URL, testkit.GRPC, azpOnly).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{})); err != nil {
		t.Fatalf("oidc.azp_as_audience: %v", err)
	}
}

// A client's owner can define a client role named svc-admin on their own
// client; the edge and the backend read client roles only from the API's own
// client (resource_access.<audience>), so that role makes no one an admin.
func TestClientRolesOfAnotherClientGrantNothing(t *testing.T) {
	t.Parallel()
	iss, st := startStackWithIssuer(t, devissuer.Config{}, nil)
	ctx := ctxT(t)
	bob := testkit.NewClients(st.edge.URL, testkit.GRPC, testkit.Token(t, iss.URL(), "bob"))
	org, err := bob.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "bobs", BillingEmail: "bob@example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	clientRole := func(client, role string) string {
		return mintFor(t, iss, "alice", func(c map[string]any) {
			c["azp"] = client
			c["resource_access"] = map[string]any{client: map[string]any{"roles": []any{role}}}
		})
	}
	for _, p := range []testkit.Protocol{testkit.HTTPJSON, testkit.GRPC} {
		t.Run(string(p), func(t *testing.T) {
			// svc-admin of the client team-tool: still alice, a person who is
			// no member of bob's organization (the backend's rule).
			attacker := testkit.NewClients(st.edge.URL, p, clientRole("team-tool", "svc-admin"))
			_, err := attacker.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Msg.Id}))
			wantError(t, err, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND", "svc.v1.OrganizationService")
			// svc-viewer of team-tool: the edge does not take her for a service
			// account either, so she may create an organization as a person.
			viewer := testkit.NewClients(st.edge.URL, p, clientRole("team-tool", "svc-viewer"))
			if _, err := viewer.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "alices-" + string(p), BillingEmail: "alice@example.com"})); err != nil {
				t.Fatalf("a person with another client's svc-viewer role: %v", err)
			}
			// The API's own client roles count, at the edge and the backend.
			admin := testkit.NewClients(st.edge.URL, p, clientRole(devissuer.DefaultAudience, "svc-admin"))
			if _, err := admin.Org.GetOrganization(ctx, req(&svcv1.GetOrganizationRequest{OrganizationId: org.Msg.Id})); err != nil {
				t.Fatalf("svc-admin of the API's own client: %v", err)
			}
		})
	}
}

// An ID token says who logged in to a client; it is no access token, even
// when its aud is the API's client. The edge and the backend refuse it.
func TestIDTokensAreRefused(t *testing.T) {
	t.Parallel()
	// A realm where the API's client id is also a client people log in to
	// (a shared front-end client): its ID tokens name the API in aud.
	icfg := devissuer.DefaultConfig()
	icfg.Clients = append(icfg.Clients, devissuer.Client{ID: devissuer.DefaultAudience, Public: true})
	iss, st := startStackWithIssuer(t, icfg, nil)
	login := func(client string) devissuer.Tokens {
		toks, err := devissuer.FetchTokens(ctxT(t), testkit.HTTP1Client, iss.URL(), url.Values{
			"grant_type": {"password"}, "client_id": {client}, "username": {"carol"}, "password": {"carol"},
		})
		if err != nil || toks.IDToken == "" {
			t.Fatalf("login through %s: %+v, %v", client, toks, err)
		}
		return toks
	}
	cli, api := login(devissuer.DevPublicClient), login(devissuer.DefaultAudience)
	for _, p := range []testkit.Protocol{testkit.HTTPJSON, testkit.ConnectProto, testkit.GRPC, testkit.GRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			for _, tok := range []string{api.IDToken, cli.IDToken} {
				_, err := testkit.NewClients(st.edge.URL, p, tok).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
				wantError(t, err, connect.CodeUnauthenticated, "TOKEN_INVALID", "edge")
			}
			// The access token of the same login passes.
			if _, err := testkit.NewClients(st.edge.URL, p, api.AccessToken).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{})); err != nil {
				t.Fatalf("access token: %v", err)
			}
		})
	}
	// The backend, called directly, refuses it too.
	_, err := testkit.NewClients(st.backend.URL, testkit.GRPC, api.IDToken).Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("backend: %v, want unauthenticated", err)
	}
}
