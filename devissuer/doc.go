// Package devissuer is a small OpenID Connect issuer for development and tests.
//
// It serves Keycloak-style paths under <base URL>/realms/<realm> (discovery,
// JWKS, token endpoint), so that the edge, the backend and the load tool talk
// to it exactly as they talk to Keycloak in production: real RS256 tokens, over
// a real HTTP socket, verified by go-oidc. Its fixtures (see [DefaultConfig])
// are a public contract: docs and outside checks name the clients, users and
// passwords listed there.
//
// It is not an identity provider. It has no authorization endpoint, no refresh
// tokens, no sessions and no persistence: signing keys live in memory, so tokens
// do not survive a restart (subjects do, see [UserSubject]). Never run it where
// its fixed passwords would be reachable by anyone but the developer.
package devissuer
