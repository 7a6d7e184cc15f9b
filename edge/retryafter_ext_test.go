package edge_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// slowFreePlan makes the free plan one call a minute and holds early calls
// past max for hold.
func slowFreePlan(max int, hold time.Duration) func(*config.Config) {
	return func(c *config.Config) {
		p := c.Limits.Plans["free"]
		p.RequestsPerMinute, p.Burst = 1, 1
		c.Limits.Plans["free"] = p
		c.Listen.MaxEarlyCalls, c.Listen.MaxEarlyCallHold = max, hold
	}
}

// oneConnection is a client that keeps every call on one connection, in
// HTTP/1.1 or cleartext HTTP/2.
func oneConnection(t *testing.T, h2 bool) *http.Client {
	t.Helper()
	var p http.Protocols
	if h2 {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr := &http.Transport{Protocols: &p, MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func heldCalls(t *testing.T, s *stack) float64 {
	t.Helper()
	return testkit.Scrape(t, s.edge.AdminURL+"/metrics").Sum("edge_early_calls_held_total")
}

// TestClientIgnoringRetryAfterIsHeldAfterMaxEarlyCalls: a client that keeps
// calling after a 429 told it to wait a minute gets its next max calls
// refused at once, then each further call held before its answer, over
// HTTP/1.1 (plain JSON) and HTTP/2 (gRPC), on any connection: the hold
// follows the subject and the limit, not the connection.
func TestClientIgnoringRetryAfterIsHeldAfterMaxEarlyCalls(t *testing.T) {
	t.Parallel()
	const max, hold = 5, 1500 * time.Millisecond
	s, token := startStack(t, orgsvc.Config{}, slowFreePlan(max, hold))
	for _, c := range []struct {
		name string
		p    testkit.Protocol
		h2   bool
	}{{"http1 json", testkit.HTTPJSON, false}, {"http2 grpc", testkit.GRPC, true}} {
		t.Run(c.name, func(t *testing.T) {
			tok := token("free-flood-" + strconv.FormatBool(c.h2))
			list := func(hc *http.Client) (*connect.Error, time.Duration) {
				var org svcv1connect.OrganizationServiceClient
				if c.p == testkit.HTTPJSON {
					org = &testkit.JSONClient{HTTP: hc, BaseURL: s.edge.URL, Header: http.Header{"Authorization": {"Bearer " + tok}}}
				} else {
					org = testkit.NewClientsWith(hc, s.edge.URL, c.p, tok).Org
				}
				start := time.Now()
				_, err := org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
				var ce *connect.Error
				if err != nil && !errors.As(err, &ce) {
					t.Fatal(err)
				}
				return ce, time.Since(start)
			}
			hc := oneConnection(t, c.h2)
			// The plan's one call, then its first refusal.
			var first *connect.Error
			for range 3 {
				if first, _ = list(hc); first != nil {
					break
				}
			}
			if first == nil || first.Code() != connect.CodeResourceExhausted || first.Meta().Get("Retry-After") == "" {
				t.Fatalf("no refusal with Retry-After: %v", first)
			}
			before := heldCalls(t, s)
			for i := range max {
				if ce, _ := list(hc); ce == nil || ce.Code() != connect.CodeResourceExhausted {
					t.Fatalf("early call %d: %v, want a refusal", i+1, ce)
				}
			}
			if got := heldCalls(t, s) - before; got != 0 {
				t.Fatalf("%v calls held within the first %d early ones", got, max)
			}
			// Past max: held (for at most max_early_call_hold, since the
			// minute is not up), then refused as before.
			ce, took := list(hc)
			if ce == nil || ce.Code() != connect.CodeResourceExhausted {
				t.Fatalf("held call: %v, want a refusal", ce)
			}
			if got := heldCalls(t, s) - before; got != 1 {
				t.Fatalf("%v calls held, want 1", got)
			}
			if took < hold {
				t.Errorf("the held call was answered after %v, before its hold of %v", took, hold)
			}
			// The same subject on a new connection is as early: held too.
			other := oneConnection(t, c.h2)
			if ce, took := list(other); ce == nil || ce.Code() != connect.CodeResourceExhausted || took < hold {
				t.Fatalf("other connection: %v after %v, want a refusal after its hold of %v", ce, took, hold)
			}
			if got := heldCalls(t, s) - before; got != 2 {
				t.Errorf("%v calls held after the same subject's call on another connection, want 2", got)
			}
		})
	}
}

// TestAHoldTouchesOnlyTheRefusedLimitOfTheRefusedSubject: a subject that
// keeps calling ListOrganizations past its operation's rate is held, on
// its connection, for that operation; meanwhile its GetUsage calls on the
// same connection, and another subject's ListOrganizations calls there (a
// proxy in front carries many), are answered at once, none held.
func TestAHoldTouchesOnlyTheRefusedLimitOfTheRefusedSubject(t *testing.T) {
	t.Parallel()
	const max, hold = 2, 1500 * time.Millisecond
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		c.Listen.MaxEarlyCalls, c.Listen.MaxEarlyCallHold = max, hold
		for i := range c.Operations {
			if c.Operations[i].Procedure == svcv1connect.OrganizationServiceListOrganizationsProcedure {
				c.Operations[i].RatePerMinute = 1
			}
		}
	})
	hc := oneConnection(t, false)
	client := func(tok string) (*testkit.JSONClient, *testkit.JSONClient) {
		h := http.Header{"Authorization": {"Bearer " + tok}}
		return &testkit.JSONClient{HTTP: hc, BaseURL: s.edge.URL, Header: h}, &testkit.JSONClient{HTTP: hc, BaseURL: s.edge.URL, Header: h}
	}
	org, usage := client(token("free-op-flood"))
	list := func(c *testkit.JSONClient) (*connect.Error, time.Duration) {
		start := time.Now()
		_, err := c.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		var ce *connect.Error
		if err != nil && !errors.As(err, &ce) {
			t.Fatal(err)
		}
		return ce, time.Since(start)
	}
	if ce, _ := list(org); ce != nil {
		t.Fatalf("the operation's one call: %v", ce)
	}
	for i := range max + 1 {
		if ce, _ := list(org); ce == nil || ce.Meta().Get("Retry-After") == "" {
			t.Fatalf("call %d past the operation's rate: %v, want a refusal with Retry-After", i+1, ce)
		}
	}
	before := heldCalls(t, s)
	if ce, took := list(org); ce == nil || took < hold {
		t.Fatalf("the operation past %d early calls: %v after %v, want a refusal after its hold of %v", max, ce, took, hold)
	}
	if got := heldCalls(t, s) - before; got != 1 {
		t.Fatalf("%v calls held, want 1", got)
	}
	for i := range 10 {
		if _, err := usage.GetUsage(ctxT(t), req(&svcv1.GetUsageRequest{})); err != nil {
			t.Fatalf("GetUsage %d of the subject held for ListOrganizations: %v", i+1, err)
		}
	}
	other, _ := client(token("free-op-other"))
	for i := range 3 {
		if ce, _ := list(other); i == 0 && ce != nil {
			t.Fatalf("another subject's first call on the connection: %v", ce)
		}
	}
	if got := heldCalls(t, s) - before; got != 1 {
		t.Errorf("%v calls held after the subject's other operation and another subject's calls, want 1 (only the first)", got)
	}
}

// TestClientObeyingRetryAfterIsNeverHeld: a client that waits as Retry-After
// says before each next call is refused many more times than max in a row
// on one connection, and none of its calls is held.
func TestClientObeyingRetryAfterIsNeverHeld(t *testing.T) {
	t.Parallel()
	const max = 1
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) {
		p := c.Limits.Plans["free"]
		// One call a second: the client calls at once after each admitted
		// call (refused, told to wait a second), then waits.
		p.RequestsPerMinute, p.Burst = 60, 1
		c.Limits.Plans["free"] = p
		c.Listen.MaxEarlyCalls = max
	})
	tok := token("free-obeys")
	hc := oneConnection(t, false)
	org := &testkit.JSONClient{HTTP: hc, BaseURL: s.edge.URL, Header: http.Header{"Authorization": {"Bearer " + tok}}}
	refused := 0
	for range 8 {
		_, err := org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{}))
		var ce *connect.Error
		if !errors.As(err, &ce) {
			continue
		}
		refused++
		secs, perr := strconv.Atoi(ce.Meta().Get("Retry-After"))
		if perr != nil {
			t.Fatalf("refusal without Retry-After: %v", ce)
		}
		time.Sleep(time.Duration(secs) * time.Second) // the client does as told
	}
	t.Logf("%d of 8 calls refused", refused)
	if got := heldCalls(t, s); got != 0 {
		t.Errorf("%v calls of a client that waited as told were held", got)
	}
}
