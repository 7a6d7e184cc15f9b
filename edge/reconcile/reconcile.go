// Package reconcile makes the edge's records of running environments in
// Redis agree with the backend, the source of truth, both ways: it asks the
// backend's admin listener (internal/backendapi) which environments it
// still has and which each subject created, every interval and whenever
// the limit step kicks it, and has quota apply the answer.
//
// It is not the quota: quota counts environments in Redis and decides what
// a pass changes there (quota.Environments.Reconcile); this package only
// asks the backend, paces the passes, and counts and logs them. It admits
// nothing (edge/limits).
package reconcile

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
// with the backend, the source of truth, both ways, every Interval (with a
// little jitter) and whenever it is kicked: environments the edge holds no
// record of (created while Redis was down or full, whose confirmation was
// lost, or created around the edge) are counted for the subject that
// created them; environments deleted around the edge (straight at the
// backend, by an admin job), by a forced delete whose list the edge could
// not apply, or whose delete answer it could not read, give their quota
// slot back and stop accruing compute; each within one interval.
type Reconciler struct {
	Envs     *quota.Environments
	AdminURL string // the backend's admin listener, http://host:port
	Interval time.Duration
	// Grace is how long a placeholder for an unreadable CreateEnvironment
	// answer counts before reconciliation ends it. Default Interval.
	Grace  time.Duration
	Client *http.Client
	Log    *slog.Logger
	// Size is what an environment the edge had no record of counts for
	// compute quotas once adopted (the live policy's
	// limits.environment_size); it must be set before a pass.
	Size func() quota.Size
	// Observer counts the passes; nil: nothing is counted.
	Observer Observer

	kick chan struct{}
}

// Observer is what the reconciler tells whoever counts its passes (the
// edge's metrics). Its method must be safe for concurrent use.
type Observer interface {
	// Reconciled counts a reconciliation pass ("ok", "error", "skipped"),
	// the environments it ended and those it adopted (counted, the edge
	// having held no record of them).
	Reconciled(outcome string, ended, adopted int)
}

type nopObserver struct{}

func (nopObserver) Reconciled(string, int, int) {}

// New returns a reconciler; Run starts it.
func New(envs *quota.Environments, adminURL string, interval time.Duration, log *slog.Logger) *Reconciler {
	return &Reconciler{
		Envs: envs, AdminURL: strings.TrimSuffix(adminURL, "/"), Interval: interval, Grace: interval,
		Client: &http.Client{Timeout: 10 * time.Second}, Log: log, kick: make(chan struct{}, 1),
	}
}

// obs is the Observer, or one that counts nothing.
func (r *Reconciler) obs() Observer {
	if r.Observer == nil {
		return nopObserver{}
	}
	return r.Observer
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

// Pass runs one pass now, whatever the other replicas do, counted and
// logged as the periodic passes are.
func (r *Reconciler) Pass(ctx context.Context) (quota.Reconciled, error) {
	start := time.Now()
	res, _, err := r.Envs.Reconcile(ctx, r.source(), 0)
	r.report(ctx, res, true, err, start)
	return res, err
}

// Settle reconciles one subject at once: the admin API's settle-quota.
func (r *Reconciler) Settle(ctx context.Context, subject string) (any, error) {
	res, err := r.Envs.ReconcileSubject(ctx, subject, r.source())
	if err != nil {
		return nil, err
	}
	r.obs().Reconciled("ok", res.Ended, res.Adopted)
	return map[string]int{"checked": res.Checked, "released": res.Ended, "adopted": res.Adopted}, nil
}

// source is the backend as a pass asks it.
func (r *Reconciler) source() quota.Source {
	return quota.Source{Existing: r.existing, Created: r.created, Size: r.Size(), Grace: r.Grace}
}

func (r *Reconciler) pass(ctx context.Context, lease time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(r.Interval, time.Minute))
	defer cancel()
	start := time.Now()
	res, ran, err := r.Envs.Reconcile(ctx, r.source(), lease)
	r.report(ctx, res, ran, err, start)
}

// report counts and logs a pass that began at start.
func (r *Reconciler) report(ctx context.Context, res quota.Reconciled, ran bool, err error, start time.Time) {
	switch {
	case err != nil:
		r.obs().Reconciled("error", res.Ended, res.Adopted)
		r.Log.WarnContext(ctx, "environment quota: reconciliation with the backend failed; retrying next interval",
			"err", err, "released", res.Ended, "adopted", res.Adopted, "next_in", r.Interval)
	case !ran:
		r.obs().Reconciled("skipped", 0, 0)
	default:
		r.obs().Reconciled("ok", res.Ended, res.Adopted)
		level := slog.LevelDebug
		if res.Ended > 0 || res.Adopted > 0 {
			level = slog.LevelInfo
		}
		r.Log.Log(ctx, level, "environment quota: reconciled with the backend",
			"subjects", res.Subjects, "checked", res.Checked, "released", res.Ended, "adopted", res.Adopted,
			"took", time.Since(start).Round(time.Millisecond))
	}
}

// maxBackendAnswer bounds an answer of the backend's internal endpoints
// (a page of 1,000 listed environments is about 150 KB).
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

// created asks the backend for one page of the environments it holds, by
// the subject that created them.
func (r *Reconciler) created(ctx context.Context, subject, after string) ([]quota.Held, string, error) {
	var out backendapi.CreatedPage
	in := backendapi.CreatedRequest{Subject: subject, After: after, Limit: backendapi.MaxCreatedPage}
	if err := r.call(ctx, backendapi.CreatedEnvironmentsPath, in, &out); err != nil {
		return nil, "", err
	}
	page := make([]quota.Held, len(out.Environments))
	for i, e := range out.Environments {
		page[i] = quota.Held{ID: e.ID, Subject: e.Subject, Start: e.CreatedAt}
	}
	return page, out.Next, nil
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
