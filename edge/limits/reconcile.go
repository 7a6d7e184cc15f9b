package limits

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/internal/backendapi"
)

// Reconciler makes the edge's running-environment records in Redis agree
// with the backend, the source of truth, every Interval (with a little
// jitter) and whenever it is kicked: environments deleted around the edge
// (straight at the backend, by an admin job), by a forced delete whose list
// the edge could not apply, or whose delete answer it could not read, give
// their quota slot back and stop accruing compute within one interval.
type Reconciler struct {
	Envs     *quota.Environments
	AdminURL string // the backend's admin listener, http://host:port
	Interval time.Duration
	// Grace is how long a placeholder for an unreadable CreateEnvironment
	// answer counts before reconciliation ends it. Default Interval.
	Grace  time.Duration
	Client *http.Client
	Log    *slog.Logger

	obs  Observer
	kick chan struct{}
}

// NewReconciler returns a reconciler; Run starts it.
func NewReconciler(envs *quota.Environments, adminURL string, interval time.Duration, log *slog.Logger) *Reconciler {
	return &Reconciler{
		Envs: envs, AdminURL: strings.TrimSuffix(adminURL, "/"), Interval: interval, Grace: interval,
		Client: &http.Client{Timeout: 10 * time.Second}, Log: log, kick: make(chan struct{}, 1), obs: nopObserver{},
	}
}

// Kick asks for a pass now, without waiting for the interval.
func (r *Reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default: // one is pending already
	}
}

// Run makes passes until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	for {
		// Up to a tenth early, so that replicas started together drift apart.
		wait := r.Interval - time.Duration(rand.Int64N(int64(r.Interval/10)+1))
		t := time.NewTimer(wait)
		lease := r.Interval / 2
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.kick:
			t.Stop()
			lease = 0
		case <-t.C:
		}
		r.pass(ctx, lease)
	}
}

// Pass runs one pass now, whatever the other replicas do.
func (r *Reconciler) Pass(ctx context.Context) (quota.Reconciled, error) {
	res, _, err := r.Envs.Reconcile(ctx, r.existing, 0, r.Grace)
	return res, err
}

// Settle reconciles one subject at once: the admin API's settle-quota.
func (r *Reconciler) Settle(ctx context.Context, subject string) (any, error) {
	res, err := r.Envs.ReconcileSubject(ctx, subject, r.existing, r.Grace)
	if err != nil {
		return nil, err
	}
	r.obs.Reconciled("ok", res.Ended)
	return map[string]int{"checked": res.Checked, "released": res.Ended}, nil
}

func (r *Reconciler) pass(ctx context.Context, lease time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(r.Interval, time.Minute))
	defer cancel()
	start := time.Now()
	res, ran, err := r.Envs.Reconcile(ctx, r.existing, lease, r.Grace)
	switch {
	case err != nil:
		r.obs.Reconciled("error", res.Ended)
		r.Log.WarnContext(ctx, "environment quota: reconciliation with the backend failed; retrying next interval",
			"err", err, "released", res.Ended, "next_in", r.Interval)
	case !ran:
		r.obs.Reconciled("skipped", 0)
	default:
		r.obs.Reconciled("ok", res.Ended)
		level := slog.LevelDebug
		if res.Ended > 0 {
			level = slog.LevelInfo
		}
		r.Log.Log(ctx, level, "environment quota: reconciled with the backend",
			"subjects", res.Subjects, "checked", res.Checked, "released", res.Ended, "took", time.Since(start).Round(time.Millisecond))
	}
}

// maxBackendAnswer bounds an answer of the backend's internal endpoints.
const maxBackendAnswer = 1 << 20

// existing asks the backend which of ids it still has.
func (r *Reconciler) existing(ctx context.Context, ids []string) (map[string]bool, error) {
	var out struct {
		Existing []string `json:"existing"`
	}
	if err := r.call(ctx, backendapi.ExistingEnvironmentsPath, map[string][]string{"ids": ids}, &out); err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(out.Existing))
	for _, id := range out.Existing {
		have[id] = true
	}
	return have, nil
}

// call posts in to the backend's internal endpoint at path and decodes its
// answer, bounded, into out. The client's timeout bounds the call.
func (r *Reconciler) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.AdminURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := r.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxBackendAnswer+1))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("backend answered %s at %s: %.200s", res.Status, path, data)
	}
	if len(data) > maxBackendAnswer {
		return fmt.Errorf("backend's answer at %s larger than %d bytes", path, maxBackendAnswer)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("backend's answer at %s: %w", path, err)
	}
	return nil
}
