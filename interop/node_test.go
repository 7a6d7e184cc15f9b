package interop_test

import (
	"strings"
	"testing"
)

// TestConnectNodeCallsStreamsAndReadsRefusalsInEveryTransport: connect-node
// in the Connect protocol and gRPC-Web over HTTP/1.1 and in gRPC over h2c:
// a unary call, a replay through Idempotent-Replayed, a watched status
// change, and a rate refusal read through findDetails and its headers.
func TestConnectNodeCallsStreamsAndReadsRefusalsInEveryTransport(t *testing.T) {
	t.Parallel()
	bin := node(t)
	s := startStack(t, stackOptions{})
	transports := []string{"connect", "grpc", "grpc-web"}
	checks := map[string]connectInput{}
	for _, tr := range transports {
		checks[tr] = newConnectInput(t, s, "node-"+tr)
	}
	var out map[string]connectReport
	runJSON(t, map[string]any{"edge": s.edge.URL, "descriptors": s.descriptors, "checks": checks}, &out, bin, "js/node_connect.js")
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { checkConnect(t, checks[tr], out[tr]) })
	}
}

// grpcReport is what grpc-js or grpcio tells of one unary call
// (js/node_grpcjs.js, python/grpcio_checks.py).
type grpcReport struct {
	Code              string            `json:"code"` // the library's name: RESOURCE_EXHAUSTED, or OK
	Message           string            `json:"message"`
	Organizations     int               `json:"organizations"`
	Metadata          map[string]string `json:"metadata"`
	ErrorInfo         []errorInfo       `json:"errorInfo"`
	RetryDelaySeconds []float64         `json:"retryDelaySeconds"`
	Calls             int               `json:"calls"`
}

func wantCode(t *testing.T, what string, r grpcReport, code string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: %s: %s, want %s", what, r.Code, r.Message, code)
	}
}

// checkGRPCRate asserts a gRPC client's report of a free subject's rate
// refusal: the code, the details, and the pushback equal to Retry-After.
func checkGRPCRate(t *testing.T, r grpcReport) {
	t.Helper()
	wantCode(t, "a free subject's calls until refused", r, "RESOURCE_EXHAUSTED")
	if r.Calls <= freeBurst {
		t.Errorf("refused at call %d, want after the %d of the burst", r.Calls, freeBurst)
	}
	checkRateDetails(t, r.ErrorInfo, r.RetryDelaySeconds)
	checkRateHeaders(t, r.Metadata, "grpc-retry-pushback-ms")
	if want := r.Metadata["retry-after"] + "000"; r.Metadata["grpc-retry-pushback-ms"] != want {
		t.Errorf("grpc-retry-pushback-ms %q, want Retry-After in milliseconds, %s", r.Metadata["grpc-retry-pushback-ms"], want)
	}
}

// TestGRPCJSRetryPolicyRetriesUnavailableAndWaitsForThePushback: grpc-js
// with gRPC's standard retry policy makes its 4 attempts when the edge
// answers unavailable, and a policy for RESOURCE_EXHAUSTED waits the
// pushback a rate refusal names, after which its retry is admitted.
func TestGRPCJSRetryPolicyRetriesUnavailableAndWaitsForThePushback(t *testing.T) {
	t.Parallel()
	bin := node(t)
	s := startStack(t, stackOptions{dead: true})
	var out struct {
		Unary, Retry, Rate grpcReport
		Pushback           struct {
			Refused, Retried grpcReport
			ElapsedMs        int64
		}
	}
	runJSON(t, map[string]any{
		"edge": hostPort(s.edge.URL), "dead": hostPort(s.dead.URL), "descriptors": s.descriptors,
		"pro": s.token(t, "pro-grpcjs"), "free": s.token(t, "free-grpcjs"), "pushback": s.token(t, "free-grpcjs-pushback"),
	}, &out, bin, "js/node_grpcjs.js")

	t.Run("unary", func(t *testing.T) { wantCode(t, "ListOrganizations", out.Unary, "OK") })
	t.Run("retry-policy-unavailable", func(t *testing.T) {
		wantCode(t, "ListOrganizations with the backend down", out.Retry, "UNAVAILABLE")
		// grpc-js reports the attempts before the last one.
		if got := out.Retry.Metadata["grpc-previous-rpc-attempts"]; got != "3" {
			t.Fatalf("grpc-previous-rpc-attempts %q, want 3: the policy's 4 attempts", got)
		}
	})
	t.Run("rate-refusal", func(t *testing.T) { checkGRPCRate(t, out.Rate) })
	t.Run("retry-policy-pushback", func(t *testing.T) {
		p := out.Pushback
		wantCode(t, "a free subject's calls until refused", p.Refused, "RESOURCE_EXHAUSTED")
		wantCode(t, "the next call, under a policy retrying RESOURCE_EXHAUSTED", p.Retried, "OK")
		if got := p.Retried.Metadata["grpc-previous-rpc-attempts"]; got != "1" {
			t.Fatalf("grpc-previous-rpc-attempts %q, want 1: refused, then admitted", got)
		}
		// The retry came after a pushback, not after the policy's 10 ms
		// backoff. The pushback of the attempt that was retried is not
		// reported (grpc-js tells only the last attempt's answer); it is
		// Retry-After in milliseconds, a whole number of seconds: at
		// least 1000 ms (a timer may fire a millisecond early).
		if p.ElapsedMs < 1000-5 {
			t.Fatalf("retried within %d ms, want after a pushback of at least 1000 ms", p.ElapsedMs)
		}
	})
}

func hostPort(url string) string {
	_, hp, _ := strings.Cut(url, "://")
	return hp
}
