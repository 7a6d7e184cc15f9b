package orgsvc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/orgedge/edge/internal/backendapi"
	"github.com/orgedge/edge/orgsvc/store"
)

// listEnded writes the ended environments' ids into h
// (backendapi.EndedHeader, EndedMoreHeader): the edge releases their quota
// slots at once and removes the headers from the answer.
func listEnded(h http.Header, ended []store.Environment) {
	if len(ended) == 0 {
		return
	}
	ids := make([]string, 0, min(len(ended), backendapi.MaxEndedListed))
	for _, e := range ended[:min(len(ended), backendapi.MaxEndedListed)] {
		ids = append(ids, e.ID)
	}
	h.Set(backendapi.EndedHeader, strings.Join(ids, ","))
	if len(ended) > backendapi.MaxEndedListed {
		h.Set(backendapi.EndedMoreHeader, "true")
	}
}

// maxExistingRequest bounds the endpoint's request body.
const maxExistingRequest = 128 << 10

// existingEnvironments serves backendapi.ExistingEnvironmentsPath.
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
	return []AdminRoute{{Pattern: "POST " + backendapi.ExistingEnvironmentsPath, Handler: http.HandlerFunc(s.existingEnvironments)}}
}
