package orgsvc

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminRoute is one more route of the admin listener.
type AdminRoute struct {
	Pattern string // as http.ServeMux takes it
	Handler http.Handler
}

// AdminHandler serves /healthz (the process is alive), /readyz (ready
// answers nil: storage answers and tokens can be verified), /metrics from
// g, and routes (the Service's AdminRoutes). It belongs on a listener of its own, not the
// API's, and never outside the cluster.
func AdminHandler(g prometheus.Gatherer, ready func(context.Context) error, routes ...AdminRoute) http.Handler {
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "%v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	return mux
}
