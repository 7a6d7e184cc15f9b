package forward_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/forward"
	"github.com/orgedge/edge/edge/observe"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/wire"
)

// The step alone, with a fake backend in place of the pool: what a Connect
// JSON client sees, and what the call's recorder says its result was.

type backendFunc func(*http.Request) (*http.Response, error)

func (f backendFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var getOrg = wire.Call{Protocol: wire.Connect, Procedure: "/svc.v1.OrganizationService/GetOrganization",
	Service: "svc.v1.OrganizationService", Method: "GetOrganization", JSON: true, UnaryConnect: true}

// forwardOnce sends one Connect JSON call through the step to backend and
// returns what the client got and the result the recorder read.
func forwardOnce(t *testing.T, ctx context.Context, backend backendFunc) (*httptest.ResponseRecorder, string) {
	t.Helper()
	up, _ := url.Parse("http://backend.invalid")
	step := forward.New(forward.Options{Upstream: up, Transport: backend, Tracing: observe.NewTracing(nil),
		Logger: slog.New(slog.DiscardHandler), StreamWriteTimeout: time.Second})
	client := httptest.NewRecorder()
	rec := call.NewRecorder(client, getOrg)
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, getOrg.Procedure, strings.NewReader(`{"organization_id":"org_1"}`))
	r.Header.Set("Content-Type", "application/json")
	r = r.WithContext(call.With(r.Context(), &call.State{Call: getOrg, Rec: rec}))
	step.ServeHTTP(rec, r)
	// The client's request ends only when the client leaves; the call's
	// deadline is the step's own context (the chain's callContext).
	return client, rec.Result(getOrg, errors.Is(ctx.Err(), context.Canceled))
}

func TestABackendThatDoesNotAnswerIsUnavailableInTheCallersProtocol(t *testing.T) {
	client, code := forwardOnce(t, context.Background(), func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})
	if client.Code != http.StatusServiceUnavailable || !strings.Contains(client.Body.String(), `"UPSTREAM_UNAVAILABLE"`) {
		t.Fatalf("client got %d %s, want 503 with reason UPSTREAM_UNAVAILABLE", client.Code, client.Body)
	}
	if code != "unavailable" {
		t.Fatalf("recorded result %q, want unavailable", code)
	}
}

func TestACallWhoseDeadlinePassedAtTheBackendIsDeadlineExceeded(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	client, code := forwardOnce(t, ctx, func(r *http.Request) (*http.Response, error) {
		return nil, r.Context().Err()
	})
	if client.Code != http.StatusGatewayTimeout || code != "deadline_exceeded" {
		t.Fatalf("client got %d %s, recorded %q; want 504 deadline_exceeded", client.Code, client.Body, code)
	}
}

func TestACallWhoseClientLeftIsCanceledAndAnsweredNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	client, code := forwardOnce(t, ctx, func(r *http.Request) (*http.Response, error) {
		return nil, r.Context().Err()
	})
	if client.Body.Len() != 0 || code != "canceled" {
		t.Fatalf("client got %d %q, recorded %q; want nothing written and canceled", client.Code, client.Body, code)
	}
}

func TestABackendsConnectErrorReachesAJSONClientWithItsCode(t *testing.T) {
	client, code := forwardOnce(t, context.Background(), func(r *http.Request) (*http.Response, error) {
		body := `{"code":"not_found","message":"organization org_1 not found"}`
		return &http.Response{StatusCode: http.StatusNotFound, Request: r, ContentLength: int64(len(body)),
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	if client.Code != http.StatusNotFound || !strings.Contains(client.Body.String(), `"not_found"`) || code != "not_found" {
		t.Fatalf("client got %d %s, recorded %q; want 404 not_found", client.Code, client.Body, code)
	}
}

func TestACallThisEdgeForwardedThatCameBackIsALoop(t *testing.T) {
	up, _ := url.Parse("http://backend.invalid")
	pseudonym := proxy.NewPseudonym()
	step := forward.New(forward.Options{Upstream: up, Transport: http.DefaultTransport, Tracing: observe.NewTracing(nil),
		Logger: slog.New(slog.DiscardHandler), StreamWriteTimeout: time.Second, Pseudonym: pseudonym})
	r := httptest.NewRequest(http.MethodPost, getOrg.Procedure, nil)
	r.Header.Add("Via", "1.1 another-proxy")
	if loop := step.Loop(r); loop != nil {
		t.Fatalf("a call through another proxy: %v, want no loop", loop)
	}
	r.Header.Add("Via", "2 "+pseudonym)
	if loop := step.Loop(r); loop == nil || loop.Code() != connect.CodeInternal {
		t.Fatalf("a call whose Via names this edge: %v, want internal FORWARDING_LOOP", loop)
	}
}
