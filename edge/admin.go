package edge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness condition: nil when ready.
type Check struct {
	Name string
	Func func(context.Context) error
}

// AdminHandler serves /healthz (the process is alive), /readyz (every
// check passes: the edge can serve) and /metrics. It belongs on a listener
// of its own, not the API's.
func AdminHandler(g prometheus.Gatherer, checks ...Check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var report []string
		for _, c := range checks {
			if err := c.Func(ctx); err != nil {
				report = append(report, fmt.Sprintf("%s: %v", c.Name, err))
			}
		}
		if len(report) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(report, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	return mux
}
