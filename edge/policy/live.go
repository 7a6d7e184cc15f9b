package policy

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/quota"
	"github.com/orgedge/edge/edge/ratelimit"
)

// Live is the part of the configuration that an operator may change while
// the edge runs: plans, per-subject plans and quotas, the environment size,
// and the operation table. A Live is never changed once built; a reload
// builds a new one and swaps it in whole (Current.Store), and each call
// reads one Live from its first step to its last, so that no call sees half
// of two.
type Live struct {
	Limits config.Limits
	Table  *Table

	replaced     chan struct{} // closed when Current.Store swaps another in
	replacedOnce sync.Once
}

// NewLive takes the live part of a validated configuration.
func NewLive(cfg *config.Config) *Live {
	return &Live{Limits: cfg.Limits, Table: New(cfg.Operations), replaced: make(chan struct{})}
}

// Replaced is closed once another policy has taken this one's place. A
// refusal's retry time was computed under this policy; once it is replaced
// (a reload may have raised the limit), that time no longer says when a
// call would be admitted.
func (p *Live) Replaced() <-chan struct{} { return p.replaced }

// Current holds the policy in force. Its zero value holds none.
type Current struct{ p atomic.Pointer[Live] }

// Load returns the policy in force now.
func (c *Current) Load() *Live { return c.p.Load() }

// Store makes p the policy in force, and closes the Replaced channel of the
// one it replaces.
func (c *Current) Store(p *Live) {
	if old := c.p.Swap(p); old != nil && old != p {
		old.replacedOnce.Do(func() { close(old.replaced) })
	}
}

// Names of rate limits, in decisions, headers and metrics: the plan's, and
// an operation's (OperationPrefix + its method).
const (
	PlanLimit       = "plan"
	OperationPrefix = "op:"
)

// Rates is what a subject's calls are limited by under plan: the plan's
// rate and daily cap, then the rate of each of ops that has one of its own.
// The limit step asks it for one call (with the call's operation when its
// rate applies), the operator API for every operation; both so name and
// size the same buckets.
func Rates(subject string, plan config.Plan, ops ...config.Operation) ratelimit.Request {
	req := ratelimit.Request{
		Subject: subject,
		Limits:  make([]ratelimit.Limit, 1, 1+len(ops)),
		Daily:   int(plan.RequestsPerDay),
	}
	req.Limits[0] = ratelimit.Limit{Name: PlanLimit, Rate: plan.RequestsPerMinute, Period: time.Minute, Burst: plan.Burst}
	for _, op := range ops {
		if op.RatePerMinute > 0 {
			_, method, _ := strings.Cut(strings.TrimPrefix(op.Procedure, "/"), "/")
			req.Limits = append(req.Limits, ratelimit.Limit{Name: OperationPrefix + method, Rate: op.RatePerMinute, Period: time.Minute, Burst: op.RatePerMinute})
		}
	}
	return req
}

// QuotaOf is the quota a subject's configured quotas make (Unlimited is the
// quota package's 0).
func QuotaOf(q config.Quotas) quota.Quota {
	return quota.Quota{
		ConcurrentEnvironments: int(q.ConcurrentEnvironments), EnvironmentsPerMonth: int(q.EnvironmentsPerMonth),
		VCPUHoursPerMonth: float64(q.VCPUHoursPerMonth), MemoryGBHoursPerMonth: float64(q.MemoryGBHoursPerMonth),
	}
}
