//go:build !nodev

package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
)

// A freshly started `edge -dev` facing a burst must not take its embedded
// store's queue, or connections still being dialled, for a Redis outage:
// thirty concurrent calls with one Idempotency-Key get the answer, aborted
// (in flight) or the replay; never unavailable, and nothing fails open.
func TestDevModeBurstOfKeyedCallsGetsNoUnavailable(t *testing.T) {
	runDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := devissuer.Password(ctx, testkit.HTTP1Client, "http://127.0.0.1:8081/realms/dev", "cli", "pro-burst", "dev")
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	var (
		mu      sync.Mutex
		answers = map[string]int{}
		wg      sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			p := []testkit.Protocol{testkit.ConnectJSON, testkit.GRPC, testkit.HTTPJSON}[i%3]
			r := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "burst-" + string(p), BillingEmail: "a@b.example"})
			r.Header().Set("Idempotency-Key", "burst-"+string(p))
			_, err := testkit.NewClients("http://127.0.0.1:8080", p, tok).Org.CreateOrganization(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			answers[answer(err)]++
		})
	}
	wg.Wait()
	for a, k := range answers {
		if a != "ok" && a != "aborted IDEMPOTENCY_KEY_IN_USE" {
			t.Errorf("%d of %d calls answered %s", k, n, a)
		}
	}
	m := testkit.Scrape(t, "http://127.0.0.1:9090/metrics")
	for _, s := range []struct{ name, label, value string }{
		{"edge_redis_errors_total", "", ""},
		{"edge_fail_open_active", "", ""},
		{"edge_idempotency_total", "outcome", "unavailable"},
	} {
		if v := m.Sum(s.name, s.label, s.value); v != 0 {
			t.Errorf("%s{%s=%q} = %v, want 0", s.name, s.label, s.value, v)
		}
	}
	t.Logf("answers: %v", answers)
}

// answer names an outcome as "ok" or "<code> <ErrorInfo reason>".
func answer(err error) string {
	var ce *connect.Error
	if err == nil {
		return "ok"
	}
	if !errors.As(err, &ce) {
		return err.Error()
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ce.Code().String() + " " + ei.Reason
			}
		}
	}
	return ce.Code().String()
}
