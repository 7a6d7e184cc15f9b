package interop_test

import (
	"strconv"
	"strings"
	"testing"
)

// errorInfo is a google.rpc.ErrorInfo as a client decoded it.
type errorInfo struct {
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata"`
}

// clientError is what a Connect-ES client tells of a failed call
// (js/connect_checks.js, describeError).
type clientError struct {
	Code              string            `json:"code"` // Connect-ES's Code name: "ResourceExhausted"
	Message           string            `json:"message"`
	Cause             string            `json:"cause"`
	Headers           map[string]string `json:"headers"`
	ErrorInfo         []errorInfo       `json:"errorInfo"`
	RetryDelaySeconds []float64         `json:"retryDelaySeconds"`
}

// connectReport is the report of runChecks for one transport.
type connectReport struct {
	Unary struct {
		ID    string       `json:"id"`
		Name  string       `json:"name"`
		Error *clientError `json:"error"`
	} `json:"unary"`
	Replay struct {
		Calls []struct {
			ID      string            `json:"id"`
			Headers map[string]string `json:"headers"`
		} `json:"calls"`
		Error *clientError `json:"error"`
	} `json:"replay"`
	Watch watchReport `json:"watch"`
	Rate  struct {
		Calls int          `json:"calls"`
		Error *clientError `json:"error"`
	} `json:"rate"`
}

type watchReport struct {
	Statuses []string     `json:"statuses"`
	Error    *clientError `json:"error"`
}

// connectInput is runChecks' input for one transport.
type connectInput struct {
	Pro       string `json:"pro"`
	Free      string `json:"free"`
	ProjectID string `json:"projectId"`
	Tag       string `json:"tag"`
}

func newConnectInput(t *testing.T, s *stack, client string) connectInput {
	t.Helper()
	pro := s.token(t, "pro-"+client)
	return connectInput{Pro: pro, Free: s.token(t, "free-"+client), ProjectID: s.project(t, pro, client), Tag: client}
}

func noError(t *testing.T, what string, e *clientError) {
	t.Helper()
	if e != nil {
		t.Fatalf("%s: %s: %s (cause: %s)", what, e.Code, e.Message, e.Cause)
	}
}

// checkConnect asserts a runChecks report, one subtest per check.
func checkConnect(t *testing.T, in connectInput, r connectReport) {
	t.Run("unary", func(t *testing.T) {
		noError(t, "CreateOrganization then GetOrganization", r.Unary.Error)
		if !strings.HasPrefix(r.Unary.ID, "org_") || r.Unary.Name != "unary-"+in.Tag {
			t.Fatalf("got organization %q named %q, want org_… named unary-%s", r.Unary.ID, r.Unary.Name, in.Tag)
		}
	})
	t.Run("idempotent-replay", func(t *testing.T) {
		noError(t, "CreateOrganization twice with one Idempotency-Key", r.Replay.Error)
		c := r.Replay.Calls
		if len(c) != 2 || c[0].ID == "" || c[0].ID != c[1].ID {
			t.Fatalf("calls %+v: want the same organization twice", c)
		}
		if c[0].Headers["idempotent-replayed"] != "" || c[1].Headers["idempotent-replayed"] != "true" {
			t.Fatalf("Idempotent-Replayed: first %q, second %q; want none, then true",
				c[0].Headers["idempotent-replayed"], c[1].Headers["idempotent-replayed"])
		}
	})
	t.Run("watch", func(t *testing.T) { checkWatch(t, r.Watch) })
	t.Run("rate-refusal", func(t *testing.T) {
		e := r.Rate.Error
		if e == nil {
			t.Fatalf("%d calls of a free subject were all admitted, want a refusal after %d", r.Rate.Calls, freeBurst)
		}
		if e.Code != "ResourceExhausted" || r.Rate.Calls <= freeBurst {
			t.Fatalf("call %d: %s: %s (cause %s), want ResourceExhausted after %d admitted calls", r.Rate.Calls, e.Code, e.Message, e.Cause, freeBurst)
		}
		checkRateDetails(t, e.ErrorInfo, e.RetryDelaySeconds)
		checkRateHeaders(t, e.Headers, "retry-after")
	})
}

func checkWatch(t *testing.T, w watchReport) {
	t.Helper()
	noError(t, "CreateEnvironment, WatchEnvironment, DeleteEnvironment", w.Error)
	if strings.Join(w.Statuses, ",") != "PROVISIONING,DELETED" {
		t.Fatalf("the stream sent %v, want PROVISIONING, then DELETED when the client deleted it", w.Statuses)
	}
}

// checkRateDetails asserts the details of a free subject's rate refusal.
func checkRateDetails(t *testing.T, info []errorInfo, retry []float64) {
	t.Helper()
	if len(info) != 1 || info[0].Reason != "RATE_LIMIT_EXCEEDED" || info[0].Metadata["plan"] != "free" {
		t.Errorf("ErrorInfo %+v, want one RATE_LIMIT_EXCEEDED of plan free", info)
	}
	// A call every 60/freePerMinute seconds: the next is at most that far.
	if len(retry) != 1 || retry[0] <= 0 || retry[0] > 60/freePerMinute {
		t.Errorf("RetryInfo delays %v s, want one in (0, %d]", retry, 60/freePerMinute)
	}
}

// checkRateHeaders asserts the rate-limit headers (or gRPC metadata) of a
// free subject's refusal, whose delay is read from the field named delay
// (Retry-After, or grpc-retry-pushback-ms in milliseconds).
func checkRateHeaders(t *testing.T, h map[string]string, delay string) {
	t.Helper()
	d, err := strconv.Atoi(h[delay])
	if delay == "grpc-retry-pushback-ms" {
		d /= 1000
	}
	if err != nil || d < 1 || d > 60/freePerMinute {
		t.Errorf("%s %q, want 1 to %d seconds (headers %v)", delay, h[delay], 60/freePerMinute, h)
	}
	if h["x-ratelimit-limit"] != strconv.Itoa(freeBurst) || h["x-ratelimit-remaining"] != "0" {
		t.Errorf("X-RateLimit-Limit %q, X-RateLimit-Remaining %q; want %d and 0", h["x-ratelimit-limit"], h["x-ratelimit-remaining"], freeBurst)
	}
	if p := h["ratelimit-policy"]; !strings.Contains(p, ";q="+strconv.Itoa(freeBurst)) {
		t.Errorf("RateLimit-Policy %q, want the plan's q=%d", p, freeBurst)
	}
}
