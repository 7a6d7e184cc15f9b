// Package devissuer is a small OpenID Connect issuer for development and tests.
//
// It serves Keycloak-style paths under <base URL>/realms/<realm> (discovery,
// JWKS, token endpoint, device authorization endpoint), so that the edge, the
// backend, the load tool and the command-line client talk to it exactly as
// they talk to Keycloak in production: real RS256 tokens, over a real HTTP
// socket, verified by go-oidc. Its fixtures (see [DefaultConfig]) are a
// public contract: docs and outside checks name the clients, users and
// passwords listed there.
//
// Grants: client credentials (service accounts), password (people, through
// a public client), the device authorization grant of RFC 8628 (people,
// through a public client: a small approval page at <issuer>/device takes the
// code and the person's username and password), and refresh tokens for
// people's tokens.
//
// It is not an identity provider. It has no authorization endpoint (no
// browser redirects), no sessions, no logout and no persistence: signing keys
// and pending device codes live in memory, so tokens do not survive a restart
// (subjects do, see [UserSubject]); refresh tokens are signed, stateless and
// cannot be revoked before they expire. Never run it where its fixed
// passwords would be reachable by anyone but the developer.
package devissuer
