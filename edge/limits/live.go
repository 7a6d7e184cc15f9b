package limits

import (
	"sync"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/policy"
)

// Live is the part of the configuration that an operator may change while
// the edge runs: plans, per-subject plans and quotas, the environment size,
// and the operation table. A Live is never changed once built; a reload
// builds a new one and swaps it in whole (SetLive), and each call reads one
// Live from its first step to its last, so that no call sees half of two.
type Live struct {
	Limits config.Limits
	Table  *policy.Table

	replaced     chan struct{} // closed when SetLive swaps another in
	replacedOnce sync.Once
}

// NewLive takes the live part of a validated configuration.
func NewLive(cfg *config.Config) *Live {
	return &Live{Limits: cfg.Limits, Table: policy.New(cfg.Operations), replaced: make(chan struct{})}
}

// Replaced is closed once another policy has taken this one's place. A
// refusal's retry time was computed under this policy; once it is replaced
// (a reload may have raised the limit), that time no longer says when a
// call would be admitted.
func (p *Live) Replaced() <-chan struct{} { return p.replaced }

// Live is the policy calls use now.
func (l *Step) Live() *Live { return l.live.Load() }

// SetLive makes p the policy of every call that starts from now on.
func (l *Step) SetLive(p *Live) {
	if old := l.live.Swap(p); old != nil && old != p {
		old.replacedOnce.Do(func() { close(old.replaced) })
	}
}

// PolicyReplaced returns a channel closed when the policy in force now is
// replaced (see Live.Replaced).
func (l *Step) PolicyReplaced() <-chan struct{} { return l.Live().Replaced() }
