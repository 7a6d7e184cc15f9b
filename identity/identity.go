// Package identity verifies OIDC access tokens and turns their claims into a
// Principal: who is calling, with which roles and plan. The edge and the
// backend both use it, with the same issuer configuration.
//
// It is not an OIDC client: it never obtains tokens, and it keeps no session.
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Reasons carried in the ErrorInfo of an unauthenticated error.
const (
	ReasonTokenMissing = "TOKEN_MISSING"
	ReasonTokenExpired = "TOKEN_EXPIRED"
	ReasonTokenInvalid = "TOKEN_INVALID"
	// ReasonIssuerUnavailable is not the caller's fault: the identity
	// provider could not be reached to verify the token. Report it as
	// unavailable, not unauthenticated.
	ReasonIssuerUnavailable = "ISSUER_UNAVAILABLE"
)

// ServiceAccountRolePrefix marks the roles that make a token a service account.
const ServiceAccountRolePrefix = "svc-"

// Error is an authentication failure. Message is safe to show to the caller:
// it never contains the token.
type Error struct {
	Reason  string // one of the Reason constants
	Message string
	Err     error // the underlying cause, for logs; may be nil
	// Retryable reports that the same token may be accepted later (its
	// signing key is not known yet, or the issuer is unreachable): a cache
	// of refused tokens must not remember this refusal.
	Retryable bool
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// MaxTokenBytes bounds the Authorization header value the verifier accepts.
const MaxTokenBytes = 8 << 10

// BearerToken extracts the token from an Authorization header value.
func BearerToken(h http.Header) (string, error) {
	vals := h["Authorization"] // canonical: h.Values would canonicalize it again
	if len(vals) == 0 || vals[0] == "" {
		return "", &Error{Reason: ReasonTokenMissing, Message: "missing bearer token: send the header Authorization with the value Bearer and an access token"}
	}
	if len(vals) > 1 {
		return "", &Error{Reason: ReasonTokenInvalid, Message: "more than one Authorization header"}
	}
	v := vals[0]
	if len(v) > MaxTokenBytes {
		return "", &Error{Reason: ReasonTokenInvalid, Message: fmt.Sprintf("authorization header longer than %d bytes", MaxTokenBytes)}
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &Error{Reason: ReasonTokenInvalid, Message: "authorization scheme must be Bearer"}
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", &Error{Reason: ReasonTokenMissing, Message: "empty bearer token"}
	}
	return tok, nil
}

// Principal is the verified caller.
type Principal struct {
	Subject  string    // the token's sub
	Username string    // preferred_username, if any
	Email    string    // the e-mail address, only when the token says it is verified
	Name     string    // display name, if any
	ClientID string    // azp: the client the token was issued to
	Plan     string    // the plan claim, lowercased; empty when absent
	Roles    []string  // sorted, de-duplicated
	Expiry   time.Time // when the token expires
	// SubjectSum is SHA-256 of Subject, when the authenticator computed
	// it (SumSubject, once per verified token): logs and Redis keys name
	// the subject by it. Zero otherwise.
	SubjectSum [32]byte
	hash       string // Hash, made with SubjectSum
}

// SumSubject sets SubjectSum, and Hash with it: once per verified token,
// not once per call.
func (p *Principal) SumSubject() {
	p.SubjectSum = sha256.Sum256([]byte(p.Subject))
	p.hash = hex.EncodeToString(p.SubjectSum[:6])
}

// ServiceAccount reports whether the principal is a service account: a token
// with any svc-* role.
func (p *Principal) ServiceAccount() bool {
	for _, r := range p.Roles {
		if strings.HasPrefix(r, ServiceAccountRolePrefix) {
			return true
		}
	}
	return false
}

// HasRole reports whether the principal holds role.
func (p *Principal) HasRole(role string) bool {
	_, ok := slices.BinarySearch(p.Roles, role)
	return ok
}

// DisplayName is the best human name the token offers.
func (p *Principal) DisplayName() string {
	switch {
	case p.Name != "":
		return p.Name
	case p.Username != "":
		return p.Username
	default:
		return p.Email
	}
}

// errAsIdentity returns the *Error in err's chain, or wraps err as TOKEN_INVALID.
func errAsIdentity(err error) *Error {
	var ie *Error
	if errors.As(err, &ie) {
		return ie
	}
	return &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: err}
}
