package orgsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// internalTimeout bounds the storage work of one internal call.
const internalTimeout = 10 * time.Second

// existingEnvironments serves backendapi.ExistingEnvironmentsPath.
func (s *Service) existingEnvironments(w http.ResponseWriter, r *http.Request) {
	var in struct {
		IDs []string `json:"ids"`
	}
	if !readInternal(w, r, maxExistingRequest, &in, `want {"ids": ["env_…", …]}`) {
		return
	}
	if len(in.IDs) > store.MaxExistingIDs {
		http.Error(w, "too many ids", http.StatusRequestEntityTooLarge)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), internalTimeout)
	defer cancel()
	found, err := s.store.ExistingEnvironments(ctx, in.IDs)
	if err != nil {
		storageFailed(w, err)
		return
	}
	if found == nil {
		found = []string{}
	}
	writeInternal(w, map[string][]string{"existing": found})
}

// createdEnvironments serves backendapi.CreatedEnvironmentsPath.
func (s *Service) createdEnvironments(w http.ResponseWriter, r *http.Request) {
	var in backendapi.CreatedRequest
	if !readInternal(w, r, backendapi.MaxCreatedRequest, &in, `want {"subject": "…", "after": "…", "limit": n}`) {
		return
	}
	if in.Limit == 0 {
		in.Limit = backendapi.MaxCreatedPage
	}
	if in.Limit < 0 || in.Limit > backendapi.MaxCreatedPage {
		http.Error(w, fmt.Sprintf("limit must be 1 to %d", backendapi.MaxCreatedPage), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), internalTimeout)
	defer cancel()
	envs, next, err := s.store.EnvironmentsByCreator(ctx, in.Subject, store.Page{Size: in.Limit, Token: in.After})
	if errors.Is(err, store.ErrInvalidPageToken) {
		http.Error(w, "after: not a page of this list", http.StatusBadRequest)
		return
	}
	if err != nil {
		storageFailed(w, err)
		return
	}
	out := backendapi.CreatedPage{Environments: make([]backendapi.CreatedEnvironment, len(envs)), Next: next}
	for i, e := range envs {
		out.Environments[i] = backendapi.CreatedEnvironment{ID: e.ID, Subject: e.CreatedBy, CreatedAt: e.CreatedAt}
	}
	writeInternal(w, out)
}

// readInternal reads an internal call's JSON body, at most limit bytes,
// into v; it answers the caller itself and returns false when it cannot.
func readInternal(w http.ResponseWriter, r *http.Request, limit int64, v any, want string) bool {
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return false
	case int64(len(data)) > limit:
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return false
	}
	if err := json.Unmarshal(data, v); err != nil {
		http.Error(w, want, http.StatusBadRequest)
		return false
	}
	return true
}

// storageFailed answers an internal call whose storage work failed: 503
// when it ran out of time (worth a retry), else 500.
func storageFailed(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	if errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusServiceUnavailable
	}
	http.Error(w, "storage failed", status)
}

func writeInternal(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// AdminRoutes are the routes the backend serves on its admin listener
// besides health and metrics: the internal reconciliation endpoints. Pass
// them to AdminHandler.
func (s *Service) AdminRoutes() []AdminRoute {
	return []AdminRoute{
		{Pattern: "POST " + backendapi.ExistingEnvironmentsPath, Handler: http.HandlerFunc(s.existingEnvironments)},
		{Pattern: "POST " + backendapi.CreatedEnvironmentsPath, Handler: http.HandlerFunc(s.createdEnvironments)},
	}
}
