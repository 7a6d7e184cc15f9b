package idempotency_test

import (
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/idempotency"
)

// The edge's chain calls the step after authentication, authorization and
// limits, with the proxy as next, and counts the outcome.
func ExampleStep_Serve() {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	step := idempotency.New(rdb, idempotency.Options{TTL: 24 * time.Hour, Timeout: 50 * time.Millisecond})

	var (
		procs      classify.Procedures        // from config.Procedures()
		idempotent map[string]bool            // from the operation table
		proxy      http.Handler               // edge/proxy
		subjectOf  func(*http.Request) string // authentication
		count      func(idempotency.Outcome)  // metrics
	)
	_ = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, problem := classify.Classify(r, procs)
		if problem != 0 {
			return // the chain answers it
		}
		if out := step.Serve(w, r, call, subjectOf(r), idempotent[call.Procedure], proxy); out != "" {
			count(out)
		}
	})
}
