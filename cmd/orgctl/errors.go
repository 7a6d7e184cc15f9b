package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Exit statuses, one per class of error (docs/cli.md lists them).
const (
	exitOK           = 0
	exitFailure      = 1 // not otherwise classified; also an invalid blueprint, a deletion not confirmed
	exitUsage        = 2 // bad command, flag, argument, config file or setting (issuer URL)
	exitAuth         = 3 // not logged in, session expired, credentials refused
	exitPermission   = 4 // permission_denied
	exitNotFound     = 5 // not_found
	exitConflict     = 6 // already_exists, failed_precondition, aborted
	exitInvalid      = 7 // invalid_argument, out_of_range
	exitExhausted    = 8 // resource_exhausted: rate limit or quota
	exitUnavailable  = 9 // unavailable, deadline_exceeded, network: try again
	exitInterrupted  = 130
	exitCodesSummary = `Exit status:
  0   success
  1   failure not listed below (internal, unknown); a blueprint that is not valid;
      a --force deletion answered other than yes
  2   usage or configuration: unknown command, bad flag or argument, bad config
      file, an issuer URL with no OIDC discovery document
  3   authentication: not logged in, session expired, credentials refused, unauthenticated
  4   permission_denied
  5   not_found
  6   conflict: already_exists, failed_precondition, aborted
  7   invalid_argument, out_of_range
  8   resource_exhausted (rate limit or quota), after any waiting --wait allows
  9   unavailable, deadline_exceeded, network error, timeout: trying again may work
  130 interrupted (Ctrl-C)`
)

// usageError is a mistake in how the command was called.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &usageError{fmt.Sprintf(format, a...)}
}

// configError is a setting that cannot be right: an issuer URL with no
// discovery document. hints say what a right one looks like.
type configError struct {
	msg   string
	hints []string
}

func (e *configError) Error() string { return e.msg }

// authError is a failure to get a token: not logged in, a refresh refused,
// client credentials refused.
type authError struct {
	msg string
	err error
}

func (e *authError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *authError) Unwrap() error { return e.err }

// errInvalidBlueprint is a ValidateBlueprint answer of valid: false.
var errInvalidBlueprint = errors.New("the blueprint is not valid")

// exitCode classifies err. ctx is the command's context: once it is done
// because of a signal, whatever the call returned is an interruption.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errInterrupted) {
		return exitInterrupted
	}
	if _, ok := errors.AsType[*usageError](err); ok {
		return exitUsage
	}
	if _, ok := errors.AsType[*configError](err); ok {
		return exitUsage
	}
	if errors.Is(err, errIssuerUnavailable) {
		return exitUnavailable
	}
	if _, ok := errors.AsType[*authError](err); ok {
		return exitAuth
	}
	if errors.Is(err, errInvalidBlueprint) {
		return exitFailure
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitUnavailable
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if _, ok := errors.AsType[net.Error](err); ok {
			return exitUnavailable // the issuer, unreachable or timing out
		}
		return exitFailure
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		return exitAuth
	case connect.CodePermissionDenied:
		return exitPermission
	case connect.CodeNotFound:
		return exitNotFound
	case connect.CodeAlreadyExists, connect.CodeFailedPrecondition, connect.CodeAborted:
		return exitConflict
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return exitInvalid
	case connect.CodeResourceExhausted:
		return exitExhausted
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return exitUnavailable
	case connect.CodeCanceled:
		return exitInterrupted
	default:
		return exitFailure
	}
}

// errInterrupted is the cause of the command's context when a signal ended it.
var errInterrupted = errors.New("interrupted")

// printError writes err for a person: the code, the message, and what the
// error details say, in plain words. cmdPath is the command that failed
// ("orgctl orgs create"), whose -h a usage mistake points to.
func printError(w io.Writer, ctx context.Context, err error, cmdPath string) {
	if exitCode(ctx, err) == exitInterrupted {
		fmt.Fprintln(w, "orgctl: interrupted")
		return
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		fmt.Fprintf(w, "orgctl: %v\n", err)
		if ce, ok := errors.AsType[*configError](err); ok {
			for _, h := range ce.hints {
				fmt.Fprintf(w, "  %s\n", h)
			}
		}
		if _, ok := errors.AsType[*usageError](err); ok {
			if strings.Contains(err.Error(), "\n") {
				fmt.Fprintln(w) // after a list of suggestions
			}
			fmt.Fprintf(w, "Run '%s -h' for usage.\n", cmdPath)
		}
		return
	}
	msg := ce.Message()
	if msg == "" {
		msg = ce.Code().String()
	}
	fmt.Fprintf(w, "orgctl: %s: %s\n", ce.Code(), msg)
	for _, line := range explain(ce) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		fmt.Fprintln(w, "  Log in again: orgctl login")
	case connect.CodeUnavailable:
		fmt.Fprintln(w, "  The API could not be reached or is overloaded; trying again later may work.")
	}
}

// explain turns an error's details (and Retry-After) into sentences.
func explain(ce *connect.Error) []string {
	var lines []string
	retryShown := false
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue // a detail of a type this command does not know
		}
		switch v := v.(type) {
		case *errdetails.RetryInfo:
			if v.GetRetryDelay() != nil {
				lines = append(lines, "Retry after "+humanDuration(v.GetRetryDelay().AsDuration())+".")
				retryShown = true
			}
		case *errdetails.ErrorInfo:
			line := "Reason: " + v.GetReason()
			if v.GetDomain() != "" {
				line += " (" + v.GetDomain() + ")"
			}
			lines = append(lines, line+".")
			for _, k := range sortedKeys(v.GetMetadata()) {
				lines = append(lines, fmt.Sprintf("  %s: %s", k, v.GetMetadata()[k]))
			}
		case *errdetails.QuotaFailure:
			for _, q := range v.GetViolations() {
				line := "Quota exceeded"
				if q.GetSubject() != "" {
					line += " for " + q.GetSubject()
				}
				if q.GetDescription() != "" {
					line += ": " + q.GetDescription()
				}
				lines = append(lines, line+".")
			}
		case *errdetails.BadRequest:
			for _, f := range v.GetFieldViolations() {
				lines = append(lines, fmt.Sprintf("Field %s: %s", f.GetField(), f.GetDescription()))
			}
		case *errdetails.PreconditionFailure:
			for _, p := range v.GetViolations() {
				lines = append(lines, fmt.Sprintf("Precondition %s %s: %s", p.GetType(), p.GetSubject(), p.GetDescription()))
			}
		case *errdetails.Help:
			for _, l := range v.GetLinks() {
				lines = append(lines, fmt.Sprintf("See %s: %s", l.GetDescription(), l.GetUrl()))
			}
		case *errdetails.LocalizedMessage:
			lines = append(lines, v.GetMessage())
		}
	}
	if !retryShown {
		if d, ok := retryAfterHeader(ce.Meta()); ok {
			lines = append(lines, "Retry after "+humanDuration(d)+".")
		}
	}
	return lines
}

// retryDelay is how long the API asks the caller to wait before calling
// again: RetryInfo, else the Retry-After header (seconds). ok is false when
// the error names no delay, so that waiting would not help.
func retryDelay(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ri, ok := v.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
				return max(ri.GetRetryDelay().AsDuration(), 0), true
			}
		}
	}
	return retryAfterHeader(ce.Meta())
}

func retryAfterHeader(h http.Header) (time.Duration, bool) {
	s := strings.TrimSpace(h.Get("Retry-After"))
	if s == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(s); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// humanDuration is d rounded for a person: "3s", "1m30s", "250ms".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
