package reconcile_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/reconcile"
	"github.com/orgedge/edge/internal/backendapi"
	"github.com/orgedge/edge/internal/testenv"
)

// backend is the backend's admin listener as reconciliation asks it: the
// environments it has, by id and by creator.
type backend struct {
	have    map[string]bool
	created []backendapi.CreatedEnvironment
	// tooLarge answers every question with more than the edge reads.
	tooLarge bool
}

func (b *backend) start(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+backendapi.ExistingEnvironmentsPath, func(w http.ResponseWriter, r *http.Request) {
		if b.tooLarge {
			_, _ = io.WriteString(w, `{"existing":["`+strings.Repeat("x", 2<<20)+`"]}`)
			return
		}
		var in struct {
			IDs []string `json:"ids"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in)
		out := struct {
			Existing []string `json:"existing"`
		}{Existing: []string{}}
		for _, id := range in.IDs {
			if b.have[id] {
				out.Existing = append(out.Existing, id)
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST "+backendapi.CreatedEnvironmentsPath, func(w http.ResponseWriter, r *http.Request) {
		var in backendapi.CreatedRequest
		_ = json.NewDecoder(io.LimitReader(r.Body, backendapi.MaxCreatedRequest)).Decode(&in)
		page := backendapi.CreatedPage{Environments: []backendapi.CreatedEnvironment{}}
		for _, e := range b.created {
			if in.Subject == "" || e.Subject == in.Subject {
				page.Environments = append(page.Environments, e)
			}
		}
		_ = json.NewEncoder(w).Encode(page)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// passes counts what the reconciler reports.
type passes struct {
	mu  sync.Mutex
	got []string
}

func (p *passes) Reconciled(outcome string, ended, adopted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, outcome)
}

func (p *passes) outcomes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

func newReconciler(t *testing.T, url string) (*reconcile.Reconciler, *quota.Environments, *passes) {
	t.Helper()
	envs := quota.NewEnvironments(testenv.Redis(t), quota.Options{KeyPrefix: testenv.Unique("reconcile") + ":", Timeout: 5 * time.Second})
	r := reconcile.New(envs, url, time.Minute, slog.New(slog.DiscardHandler))
	r.Size = func() quota.Size { return quota.Size{VCPUs: 2, MemoryGB: 4} }
	obs := &passes{}
	r.Observer = obs
	return r, envs, obs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Settling a subject (the operator API's settle-quota) gives back the slot
// of an environment deleted around the edge and counts one created around
// it, as the backend says.
func TestSettleReleasesWhatTheBackendDeletedAndCountsWhatItCreated(t *testing.T) {
	subject := testenv.Unique("customer")
	b := &backend{have: map[string]bool{"env-created-around": true},
		created: []backendapi.CreatedEnvironment{{ID: "env-created-around", Subject: subject, CreatedAt: time.Now().Add(-time.Minute)}}}
	r, envs, obs := newReconciler(t, b.start(t))
	res, err := envs.Reserve(ctxT(t), subject, quota.Quota{}, quota.Size{VCPUs: 2, MemoryGB: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Confirm(ctxT(t), "env-deleted-around", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}

	got, err := r.Settle(ctxT(t), subject)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"checked": 1, "released": 1, "adopted": 1}; !maps.Equal(got.(map[string]int), want) {
		t.Fatalf("settle-quota answered %v, want %v", got, want)
	}
	u, err := envs.Usage(ctxT(t), subject)
	if err != nil {
		t.Fatal(err)
	}
	if u.Environments != 1 {
		t.Fatalf("%d environments running after the settle, want 1 (the one created around the edge)", u.Environments)
	}
	if o := obs.outcomes(); len(o) != 1 || o[0] != "ok" {
		t.Fatalf("passes counted %v, want one ok", o)
	}
}

// A backend answer larger than the edge reads fails the pass, counted as
// an error, and changes nothing.
func TestAPassFailsOnAnAnswerTooLargeToRead(t *testing.T) {
	subject := testenv.Unique("customer")
	b := &backend{tooLarge: true}
	r, envs, obs := newReconciler(t, b.start(t))
	res, err := envs.Reserve(ctxT(t), subject, quota.Quota{}, quota.Size{VCPUs: 2, MemoryGB: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Confirm(ctxT(t), "env-1", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pass(ctxT(t)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Pass = %v, want the answer refused as too large", err)
	}
	if o := obs.outcomes(); len(o) != 1 || o[0] != "error" {
		t.Fatalf("passes counted %v, want one error", o)
	}
	u, err := envs.Usage(ctxT(t), subject)
	if err != nil {
		t.Fatal(err)
	}
	if u.Environments != 1 {
		t.Fatalf("%d environments running after a failed pass, want 1", u.Environments)
	}
}
