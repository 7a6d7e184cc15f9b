package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/orgsvc/store"
)

// apiError is an error a handler returns; the error interceptor turns it
// into a connect.Error whose ErrorInfo names the reason and, as domain, the
// service that answered.
type apiError struct {
	code    connect.Code
	reason  string
	msg     string
	meta    map[string]string
	details []proto.Message
}

func (e *apiError) Error() string { return e.msg }

func errorf(code connect.Code, reason, format string, args ...any) *apiError {
	return &apiError{code: code, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// Reasons that are not named after a store error.
const (
	reasonValidation       = "VALIDATION_FAILED"
	reasonMissingRole      = "MISSING_ROLE"
	reasonAdminRequired    = "ADMIN_ROLE_REQUIRED"
	reasonMemberSuspended  = "MEMBER_SUSPENDED"
	reasonAccessRevoked    = "ACCESS_REVOKED"
	reasonBlueprintMissing = "BLUEPRINT_NOT_FOUND"
	reasonInternal         = "INTERNAL"
)

// storeErrors maps each store error to the API's code and reason.
var storeErrors = []struct {
	err    error
	code   connect.Code
	reason string
}{
	{store.ErrOrganizationNotFound, connect.CodeNotFound, "ORGANIZATION_NOT_FOUND"},
	{store.ErrOrganizationNameTaken, connect.CodeAlreadyExists, "ORGANIZATION_NAME_TAKEN"},
	{store.ErrOrganizationHasProjects, connect.CodeFailedPrecondition, "ORGANIZATION_HAS_PROJECTS"},
	{store.ErrProjectNotFound, connect.CodeNotFound, "PROJECT_NOT_FOUND"},
	{store.ErrProjectNameTaken, connect.CodeAlreadyExists, "PROJECT_NAME_TAKEN"},
	{store.ErrProjectHasEnvironments, connect.CodeFailedPrecondition, "PROJECT_HAS_ENVIRONMENTS"},
	{store.ErrMemberNotFound, connect.CodeNotFound, "MEMBER_NOT_FOUND"},
	{store.ErrAlreadyMember, connect.CodeAlreadyExists, "ALREADY_MEMBER"},
	{store.ErrLastAdmin, connect.CodeFailedPrecondition, "LAST_ADMIN"},
	{store.ErrEnvironmentNotFound, connect.CodeNotFound, "ENVIRONMENT_NOT_FOUND"},
	{store.ErrEnvironmentNameTaken, connect.CodeAlreadyExists, "ENVIRONMENT_NAME_TAKEN"},
	{store.ErrInvalidPageToken, connect.CodeInvalidArgument, "INVALID_PAGE_TOKEN"},
}

// fieldViolations collects the bad fields of one request.
type fieldViolations []*errdetails.BadRequest_FieldViolation

func (v *fieldViolations) add(field, format string, args ...any) {
	*v = append(*v, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// err returns nil when no field is bad, else an invalid_argument error with a
// google.rpc.BadRequest naming each bad field.
func (v fieldViolations) err() error {
	if len(v) == 0 {
		return nil
	}
	names := make([]string, len(v))
	for i, f := range v {
		names[i] = f.Field + ": " + f.Description
	}
	return &apiError{
		code:    connect.CodeInvalidArgument,
		reason:  reasonValidation,
		msg:     "invalid request: " + strings.Join(names, "; "),
		details: []proto.Message{&errdetails.BadRequest{FieldViolations: v}},
	}
}

// toConnectError converts any error a handler returns into a connect.Error
// that carries exactly one ErrorInfo. Unexpected errors are logged and hidden.
func toConnectError(ctx context.Context, log *slog.Logger, peer connect.Peer, domain string, err error) *connect.Error {
	if err == nil {
		return nil
	}
	var ae *apiError
	var ie *identity.Error
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ie):
		ae = identityError(ie)
	default:
		for _, m := range storeErrors {
			if errors.Is(err, m.err) {
				ae = &apiError{code: m.code, reason: m.reason, msg: m.err.Error()}
				break
			}
		}
	}
	if ae == nil {
		if ce := new(connect.Error); errors.As(err, &ce) {
			return ce // already an API error (e.g. from connect itself)
		}
		switch {
		case errors.Is(err, context.Canceled):
			ae = &apiError{code: connect.CodeCanceled, reason: "CANCELED", msg: "request canceled"}
		case errors.Is(err, context.DeadlineExceeded):
			ae = &apiError{code: connect.CodeDeadlineExceeded, reason: "DEADLINE_EXCEEDED", msg: "deadline exceeded"}
		default:
			log.ErrorContext(ctx, "internal error", "err", err)
			ae = &apiError{code: connect.CodeInternal, reason: reasonInternal, msg: "internal error"}
		}
	}
	ce := connect.NewError(ae.code, errors.New(ae.msg))
	info := &errdetails.ErrorInfo{Reason: ae.reason, Domain: domain, Metadata: ae.meta}
	for _, m := range append([]proto.Message{info}, ae.details...) {
		if d, derr := connect.NewErrorDetail(m); derr == nil {
			ce.AddDetail(d)
		}
	}
	// Plain HTTP callers learn the scheme from WWW-Authenticate; gRPC
	// callers have the code alone (their metadata are trailers).
	if ae.code == connect.CodeUnauthenticated && peer.Protocol == connect.ProtocolConnect {
		ce.Meta().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	return ce
}

func identityError(ie *identity.Error) *apiError {
	if ie.Reason == identity.ReasonIssuerUnavailable {
		return &apiError{code: connect.CodeUnavailable, reason: ie.Reason, msg: ie.Message}
	}
	return &apiError{code: connect.CodeUnauthenticated, reason: ie.Reason, msg: ie.Message}
}
