package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// defaultRetriesWithWait is the retry bound of --wait when --retries is not given.
const defaultRetriesWithWait = 5

// callPolicy is how the command calls the API: its token, the
// Idempotency-Key of its mutating call, timeouts and waiting on refusals.
type callPolicy struct {
	tokens         oauth2.TokenSource
	idempotencyKey string
	timeout        time.Duration // each unary attempt; 0: none
	retries        int           // how many times to call again after a refusal with a retry delay
	maxWait        time.Duration // total waiting allowed
	stderr         io.Writer
	waited         time.Duration
	refreshed      bool // the token was refreshed once after a refusal
}

// refusedRefresher is a token source that can replace a token the API
// refused before its expiry (sessionSource): client credentials get a new
// token for each command and have nothing to refresh.
type refusedRefresher interface {
	refreshRefused() error
}

// clients are the API's services, through the policy.
type clients struct {
	orgs      svcv1connect.OrganizationServiceClient
	envs      svcv1connect.EnvironmentServiceClient
	blueprint svcv1connect.BlueprintServiceClient
	usage     svcv1connect.UsageServiceClient
}

func newClients(hc *http.Client, api string, p *callPolicy) clients {
	opts := []connect.ClientOption{connect.WithInterceptors(p)}
	return clients{
		orgs:      svcv1connect.NewOrganizationServiceClient(hc, api, opts...),
		envs:      svcv1connect.NewEnvironmentServiceClient(hc, api, opts...),
		blueprint: svcv1connect.NewBlueprintServiceClient(hc, api, opts...),
		usage:     svcv1connect.NewUsageServiceClient(hc, api, opts...),
	}
}

// newIdempotencyKey is the key of a command's mutating call when the user
// gives none: random, so two runs of a command are two operations.
func newIdempotencyKey() string { return uuid.NewString() }

// authorize sets the bearer token, refreshing it first if it is about to expire.
func (p *callPolicy) authorize(h http.Header) error {
	tok, err := p.tokens.Token()
	if err != nil {
		return err
	}
	h.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// WrapUnary sends the token and, on mutating procedures, the
// Idempotency-Key (the same one on every attempt, so that a retry cannot run
// the operation twice), and waits out refusals that name a retry delay as
// far as the policy allows.
func (p *callPolicy) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IdempotencyLevel != connect.IdempotencyNoSideEffects {
			req.Header().Set("Idempotency-Key", p.idempotencyKey)
		}
		var resp connect.AnyResponse
		err := p.retry(ctx, func() error {
			if err := p.authorize(req.Header()); err != nil {
				return err
			}
			actx, cancel := ctx, context.CancelFunc(func() {})
			if p.timeout > 0 {
				actx, cancel = context.WithTimeout(ctx, p.timeout)
			}
			defer cancel()
			var err error
			resp, err = next(actx, req)
			return err
		})
		return resp, err
	}
}

// WrapStreamingClient sends the token; the command retries a stream itself
// (see retry), since only it knows when the stream has started.
func (p *callPolicy) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if err := p.authorize(conn.RequestHeader()); err != nil {
			return &failedConn{StreamingClientConn: conn, err: err}
		}
		return conn
	}
}

// WrapStreamingHandler is not used by a client.
func (p *callPolicy) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// failedConn is a stream that could not get a token: it fails at once.
type failedConn struct {
	connect.StreamingClientConn
	err error
}

func (c *failedConn) Send(any) error    { return c.err }
func (c *failedConn) Receive(any) error { return c.err }

// retry runs call until it succeeds, fails with an error that names no
// retry delay, or the policy's retries or waiting time run out. Once per
// command, a token the API refuses (unauthenticated) is refreshed and the
// call made again at once, before the refusal tells the person to log in.
func (p *callPolicy) retry(ctx context.Context, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil {
			return nil
		}
		if r, ok := p.tokens.(refusedRefresher); ok && !p.refreshed && connect.CodeOf(err) == connect.CodeUnauthenticated {
			p.refreshed = true
			if err := r.refreshRefused(); err != nil {
				return err
			}
			attempt-- // not a retry of --retries: the token changed, not the load
			continue
		}
		delay, ok := retryDelay(err)
		if !ok || !retryable(err) || attempt >= p.retries {
			return err
		}
		if p.waited+delay > p.maxWait {
			fmt.Fprintf(p.stderr, "orgctl: the API asks to wait %s, beyond what --max-wait (%s) leaves; giving up\n", humanDuration(delay), p.maxWait)
			return err
		}
		var ce *connect.Error
		errors.As(err, &ce)
		fmt.Fprintf(p.stderr, "orgctl: %s: %s; waiting %s (retry %d of %d)\n", ce.Code(), ce.Message(), humanDuration(delay), attempt+1, p.retries)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		p.waited += delay
	}
}

// retryable reports whether calling again later may succeed: a rate or
// concurrency limit, a duplicate still in flight, an API overloaded.
func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeResourceExhausted, connect.CodeAborted, connect.CodeUnavailable:
		return true
	}
	return false
}
