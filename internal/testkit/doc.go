// Package testkit starts the pieces of the stack on loopback for tests (a
// development issuer, the backend on SQLite or PostgreSQL) and builds clients
// for every way a user calls the API: connect-go with Connect JSON, Connect
// proto, gRPC and gRPC-Web, and a plain net/http JSON client.
package testkit
