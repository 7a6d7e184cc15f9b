// Package result reads how a call ended: [Of] is the one place that tells a
// call's code from the answer that went out, in every protocol, unary or
// streaming, compressed or not, for metrics, the access log, the span and
// the idempotency step alike.
//
// It is not a step of the chain: it refuses nothing and writes nothing to
// the client.
package result
