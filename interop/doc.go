// Package interop proves that clients nobody on this project wrote work
// against the edge unmodified: headless Chromium running connect-web and
// Google's grpc-web from a page on another origin, Node's connect-node and
// grpc-js, Python's grpcio, grpcurl and buf curl.
//
// It holds tests only. Each test starts a real stack (the development
// issuer, the backend, the edge on the real Redis of scripts/test), runs a
// client as a subprocess (a script in js/, browser/ or python/, or the tool
// itself) and asserts what the client's own API reported: codes, error
// details, headers, messages. The scripts print what they saw as JSON and
// judge nothing. scripts/test installs the clients (README.md in this
// folder); a missing one skips its test, and fails it under CI=true.
//
// It is not where the edge's behaviour is specified: the tests of edge/
// do that with Go clients; these prove that other clients read it too.
package interop
