package idempotency_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/wire"
)

// The edge's chain calls the step after authentication, authorization and
// limits, with the proxy as next, and counts the outcome. A retry with the
// same key gets the kept answer without reaching the backend.
func ExampleStep_Serve() {
	store := miniredis.NewMiniRedis() // in production: your Redis or Redis Cluster
	if err := store.Start(); err != nil {
		panic(err)
	}
	defer store.Close()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{store.Addr()}})
	defer rdb.Close()
	step := idempotency.New(rdb, idempotency.Options{TTL: 24 * time.Hour, Timeout: time.Second /* production: 50ms */})

	const create = "/svc.v1.OrganizationService/CreateOrganization"
	procs := wire.Procedures{create: false} // from config.Procedures()
	ran := 0
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // edge/proxy
		ran++
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"org_%d","name":"acme"}`, ran)
	})
	chain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, problem := wire.Classify(r, procs)
		if problem != 0 {
			return // the chain answers it
		}
		subject := "user-1" // from authentication
		eligible := true    // the operation table's idempotent column
		out, refusal := step.Serve(w, r, call, subject, eligible, false, proxy)
		if refusal != nil {
			apierror.Write(w, r, refusal) // the chain writes refusals (call.Refuse)
		}
		fmt.Println("outcome:", out) // metrics
	})

	for range 2 {
		r := httptest.NewRequest(http.MethodPost, create, strings.NewReader(`{"name":"acme"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "3f6b1c9e")
		w := httptest.NewRecorder()
		chain.ServeHTTP(w, r)
		fmt.Printf("%s replayed=%q\n", w.Body, w.Header().Get("Idempotent-Replayed"))
	}
	fmt.Println("the backend ran", ran, "time(s)")
	// Output:
	// outcome: first
	// {"id":"org_1","name":"acme"} replayed=""
	// outcome: replayed
	// {"id":"org_1","name":"acme"} replayed="true"
	// the backend ran 1 time(s)
}
