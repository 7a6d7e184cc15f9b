// Package wire is what the edge knows of the protocols it speaks (Connect,
// gRPC, gRPC-Web, HTTP/JSON), below any one step:
//
//   - which protocol a caller speaks and which procedure it calls, from a
//     request's method, path and headers alone ([Classify], [MediaType]).
//     The chain (edge.Server) asks it first, before any step that depends
//     on the answer (authentication, limits, idempotency, errors); only the
//     wrappers around the chain (conns, cors, webtext) see a request before
//     it. It reads no body and trusts nothing it reads: a request it cannot
//     place gets a [Problem] that says why;
//   - the envelopes of framed bodies ([Envelope], [Frames]);
//   - how a call ended ([Of]): the one place that tells a call's code from
//     the answer that went out, in every protocol, unary or streaming,
//     compressed or not, for metrics, the access log, the span and the
//     idempotency step alike;
//   - the message of a unary answer ([UnaryMessage]), in whichever protocol
//     it came and whichever compression the backend chose (gzip, or none),
//     for the few steps that must know what the backend answered (quotas
//     learn an environment's id). Decompression is bounded: an answer that
//     inflates past [MaxMessageBytes] is not read. The edge asks the
//     backend for identity encoding on those calls, but that is not
//     enough: a gRPC backend answers in the compression of the request,
//     which is the client's to choose.
//
// It is not a step of the chain: it refuses nothing and writes nothing to
// the client (apierror writes the edge's refusals, in the protocols read
// here), and it imports no package of the edge.
package wire
