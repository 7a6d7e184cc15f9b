package orgsvc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/orgedge/edge/orgsvc/store"
)

// Headers by which a forced DeleteProject or DeleteOrganization tells the
// edge which environments it ended, so that their quota slots come back at
// once: the ids, comma-separated (at most MaxEndedListed), and, when more
// ended than are listed, EndedEnvironmentsMoreHeader (the edge then
// reconciles at once). The edge removes both from the answer; they are
// not part of the API. (edge.EndedHeader and edge.EndedMoreHeader are the
// same names.)
const (
	EndedEnvironmentsHeader     = "Orgsvc-Ended-Environments"
	EndedEnvironmentsMoreHeader = "Orgsvc-Ended-Environments-More"
	MaxEndedListed              = 1000
)

// listEnded writes the ended environments' ids into h.
func listEnded(h http.Header, ended []store.Environment) {
	if len(ended) == 0 {
		return
	}
	ids := make([]string, 0, min(len(ended), MaxEndedListed))
	for _, e := range ended[:min(len(ended), MaxEndedListed)] {
		ids = append(ids, e.ID)
	}
	h.Set(EndedEnvironmentsHeader, strings.Join(ids, ","))
	if len(ended) > MaxEndedListed {
		h.Set(EndedEnvironmentsMoreHeader, "true")
	}
}

// ExistingEnvironmentsPath is the internal, read-only endpoint by which the
// edge reconciles its environment quota records with this backend, the
// source of truth (edge.ReconcilePath is the same path). POST
// {"ids": [...]} (at most store.MaxExistingIDs) answers {"existing": [...]}:
// which of the ids are live environments. It says nothing more than whether
// ids the caller already knows exist, and it is served only on the admin
// listener, which must stay inside the cluster.
const ExistingEnvironmentsPath = "/internal/v1/environments:existing"

// maxExistingRequest bounds the endpoint's request body.
const maxExistingRequest = 128 << 10

// existingEnvironments serves ExistingEnvironmentsPath.
func (s *Service) existingEnvironments(w http.ResponseWriter, r *http.Request) {
	var in struct {
		IDs []string `json:"ids"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxExistingRequest+1))
	switch {
	case err != nil:
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	case len(data) > maxExistingRequest:
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := json.Unmarshal(data, &in); err != nil {
		http.Error(w, `want {"ids": ["env_…", …]}`, http.StatusBadRequest)
		return
	}
	if len(in.IDs) > store.MaxExistingIDs {
		http.Error(w, "too many ids", http.StatusRequestEntityTooLarge)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	found, err := s.store.ExistingEnvironments(ctx, in.IDs)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusServiceUnavailable
		}
		http.Error(w, "storage failed", status)
		return
	}
	if found == nil {
		found = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string][]string{"existing": found})
}

// AdminRoutes are the routes the backend serves on its admin listener
// besides health and metrics: the internal reconciliation endpoint. Pass
// them to AdminHandler.
func (s *Service) AdminRoutes() []AdminRoute {
	return []AdminRoute{{Pattern: "POST " + ExistingEnvironmentsPath, Handler: http.HandlerFunc(s.existingEnvironments)}}
}
