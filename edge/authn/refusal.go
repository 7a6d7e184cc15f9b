package authn

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/identity"
)

// Refusal is the answer to a call whose authentication failed with err
// (from AuthenticateRequest). A Connect unary call's refusal carries
// WWW-Authenticate, as an HTTP client expects of a 401.
func Refusal(err error, unaryConnect bool) *connect.Error {
	if fl, ok := errors.AsType[*FailureLimitError](err); ok {
		return apierror.New(connect.CodeResourceExhausted, ReasonTooManyFailures,
			"too many failed authentications from this address: try again later with a valid token",
			apierror.WithRetryAfter(fl.RetryAfter))
	}
	var ie *identity.Error
	if !errors.As(err, &ie) {
		ie = &identity.Error{Reason: identity.ReasonTokenInvalid, Message: "invalid token"}
	}
	if ie.Reason == identity.ReasonIssuerUnavailable {
		return apierror.New(connect.CodeUnavailable, ie.Reason, ie.Message)
	}
	var opts []apierror.Option
	if unaryConnect {
		opts = append(opts, apierror.WithHeader("WWW-Authenticate", `Bearer error="invalid_token"`))
	}
	return apierror.New(connect.CodeUnauthenticated, ie.Reason, ie.Message, opts...)
}

// Reason names why authentication failed with err, for the span.
func Reason(err error) string {
	if ie := (*identity.Error)(nil); errors.As(err, &ie) {
		return ie.Reason
	}
	if _, ok := errors.AsType[*FailureLimitError](err); ok {
		return ReasonTooManyFailures
	}
	return identity.ReasonTokenInvalid
}
