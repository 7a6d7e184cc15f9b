package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/cors"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/policy"
	"github.com/orgedge/edge/internal/certfile"
)

// reloadMetrics say whether the configuration file last loaded.
type reloadMetrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastOK      prometheus.Gauge
}

// Results of edge_config_reloads_total.
const (
	reloadSuccess = "success"
	reloadFailure = "failure"
)

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_config_reloads_total",
			Help: "Reloads of the configuration file (SIGHUP or a change of the file) by result: success (the new policy applies), failure (invalid or unreadable: the running policy stays).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edge_config_last_reload_success_timestamp_seconds",
			Help: "When the policy in force was loaded (start or last successful reload), Unix seconds.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edge_config_last_reload_successful",
			Help: "1 if the last load of the configuration file succeeded, 0 if it failed and the edge runs an older policy.",
		}),
	}
	m.reloads.WithLabelValues(reloadSuccess)
	m.reloads.WithLabelValues(reloadFailure)
	m.lastSuccess.SetToCurrentTime()
	m.lastOK.Set(1)
	reg.MustRegister(m.reloads, m.lastSuccess, m.lastOK)
	return m
}

// Reload loads the configuration file at path (with the EDGE_* overrides,
// as at start), validates it, and applies its policy to every call that
// starts afterwards: calls in flight finish under the policy they started
// with, and no connection is touched. An invalid or unreadable file changes
// nothing: the error is logged, counted, and returned.
//
// The file is loaded only once it has stopped changing: two reads
// settleFor apart must agree (see readSettled), so that a file being
// written in place is not applied half-written.
//
// Only the Policy part applies. Other settings that differ from the ones
// the edge started with (addresses, Redis, the issuer, timeouts) need a
// restart: Reload logs a warning naming them and keeps the running values.
//
// WatchConfig calls it on a signal and when the file's content changes.
func (a *App) Reload(ctx context.Context, path string) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	data, err := readSettled(ctx, path)
	if h := contentHash(data); h != nil {
		a.lastRead = h
	}
	var cfg *config.Config
	if err == nil {
		cfg, err = config.LoadData(path, data, os.Getenv)
	}
	if err != nil {
		a.reloads.reloads.WithLabelValues(reloadFailure).Inc()
		a.reloads.lastOK.Set(0)
		failed := *a.policyLoad.Load()
		failed.FailedAt, failed.Error = time.Now(), err.Error()
		a.policyLoad.Store(&failed)
		a.log.Error("config reload failed: keeping the running policy", "file", path, "err", err)
		return err
	}
	a.apply(cfg)
	return nil
}

// changedSinceRead tells whether h, the hash of the file's content now,
// differs from the content the last reload read (or WatchConfig found at
// its start), so that the watcher does not reload the same content again.
func (a *App) changedSinceRead(h []byte) bool {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	return !bytes.Equal(h, a.lastRead)
}

// How long a file must stay the same before a reload loads it, and how
// long a reload waits for that at most.
const (
	settleFor = 250 * time.Millisecond
	maxSettle = 10 * time.Second
)

// readSettled reads the file at path until two reads settleFor apart
// agree, and returns that content. A file replaced whole (renamed into
// place, as editors, kubectl and ConfigMaps do) agrees at once; one written
// in place is read once its writer has paused for settleFor. A file still
// changing after maxSettle is an error.
func readSettled(ctx context.Context, path string) ([]byte, error) {
	data, err := config.ReadFile(path)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(maxSettle)
	t := time.NewTimer(settleFor)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		again, err := config.ReadFile(path)
		switch {
		case err != nil:
			return nil, err
		case bytes.Equal(again, data):
			return data, nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("%s: still changing after %s: write the file elsewhere and rename it into place", path, maxSettle)
		}
		data = again
		t.Reset(settleFor)
	}
}

// apply swaps in cfg's policy; cfg is valid.
func (a *App) apply(cfg *config.Config) {
	if restart := needRestart(a.cfg, cfg); len(restart) > 0 {
		a.log.Warn("config reload: these settings changed but apply only after a restart; the running values stay", "settings", restart)
	}
	p := policy.NewLive(cfg)
	// Counted and logged before the swap, so that whoever sees a call
	// decided by the new policy finds the reload in the metrics and the log.
	a.reloads.reloads.WithLabelValues(reloadSuccess).Inc()
	a.reloads.lastSuccess.SetToCurrentTime()
	a.reloads.lastOK.Set(1)
	a.log.Info("config reloaded: new policy applies to new calls",
		"default_plan", cfg.Limits.DefaultPlan, "plans", len(cfg.Limits.Plans),
		"subject_plans", len(cfg.Limits.SubjectPlans), "subject_quotas", len(cfg.Limits.SubjectQuotas),
		"cors_allowed_origins", len(cfg.CORS.AllowedOrigins))
	a.limits.SetLive(p)
	a.cors.Set(cfg.CORS)
	a.policyLoad.Store(&admin.PolicyLoad{LoadedAt: time.Now()})
}

// PolicyLoad says when the policy in force was loaded and whether the
// last reload failed, for the operator page.
func (a *App) PolicyLoad() admin.PolicyLoad { return *a.policyLoad.Load() }

// needRestart names the settings of next that differ from running and that
// a reload does not apply.
func needRestart(running, next *config.Config) []string {
	var out []string
	diff := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	diff("listen", running.Listen, next.Listen)
	diff("admin", running.Admin, next.Admin)
	diff("upstream", running.Upstream, next.Upstream)
	diff("oidc", running.OIDC, next.OIDC)
	diff("requests", running.Requests, next.Requests)
	diff("redis", running.Redis, next.Redis)
	diff("idempotency", running.Idempotency, next.Idempotency)
	diff("log", running.Log, next.Log)
	diff("limits.stream_lease", running.Limits.StreamLease, next.Limits.StreamLease)
	diff("limits.on_redis_failure", running.Limits.OnRedisFailure, next.Limits.OnRedisFailure)
	diff("limits.local_share", running.Limits.LocalShare, next.Limits.LocalShare)
	return out
}

// WatchConfig reloads the configuration file at path when a signal arrives
// on reload (SIGHUP in the edge command) and when the file's content
// changes, checked every interval (0: only on signals). It compares a hash
// of the content rather than the modification time, so that Kubernetes'
// ConfigMap updates (a symlink swapped) and edits within one second are
// seen, and a touch without a change is not. It returns when ctx ends.
func (a *App) WatchConfig(ctx context.Context, path string, interval time.Duration, reload <-chan os.Signal) {
	last, _ := fileHash(path)
	a.reloadMu.Lock()
	a.lastRead = last
	a.reloadMu.Unlock()
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			a.log.Info("config reload requested by signal", "file", path)
			a.reloadCerts()
			_ = a.Reload(ctx, path) // logged and counted
		case <-tick:
			a.reloadCerts()
			h, err := fileHash(path)
			if err != nil || !a.changedSinceRead(h) {
				// An unreadable file is reported by the reload that a
				// signal or the next change asks for, not every tick.
				continue
			}
			a.log.Info("config file changed: reloading", "file", path)
			_ = a.Reload(ctx, path) // logged and counted
		}
	}
}

// namedCert is a certificate read from files, named by its setting.
type namedCert struct {
	setting string
	pair    *certfile.Pair
}

// reloadCerts reads the TLS certificate files again: a certificate whose
// files changed is used from the next handshake on (connections already
// open keep theirs). Files that do not form a key pair yet (rotation half
// done) keep the running certificate and are tried again next time.
func (a *App) reloadCerts() {
	for _, c := range a.certs {
		changed, err := c.pair.Reload()
		switch {
		case err != nil:
			a.log.Warn("tls certificate not reloaded: keeping the running one", "setting", c.setting, "err", err)
		case changed:
			var notAfter time.Time
			if leaf := c.pair.Certificate().Leaf; leaf != nil {
				notAfter = leaf.NotAfter
			}
			a.log.Info("tls certificate reloaded: new connections get it", "setting", c.setting, "not_after", notAfter)
		}
	}
}

// fileHash is the SHA-256 of the file's content, as config.ReadFile reads it.
func fileHash(path string) ([]byte, error) {
	data, err := config.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hash %s: %w", path, err)
	}
	return contentHash(data), nil
}

// contentHash is the SHA-256 of data; nil for no data.
func contentHash(data []byte) []byte {
	if data == nil {
		return nil
	}
	h := sha256.Sum256(data)
	return h[:]
}

// reloadState is the App's part in reloads.
type reloadState struct {
	reloadMu sync.Mutex
	lastRead []byte // the hash of the content the last reload read; guarded by reloadMu
	reloads  *reloadMetrics
	limits   *limits.Step
	cors     *cors.Step
	// policyLoad: when the policy in force was loaded, how the last
	// reload went (read by the operator page without reloadMu, which a
	// reload holds while the file settles).
	policyLoad atomic.Pointer[admin.PolicyLoad]
}
