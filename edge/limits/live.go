package limits

import (
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
}

// NewLive takes the live part of a validated configuration.
func NewLive(cfg *config.Config) *Live {
	return &Live{Limits: cfg.Limits, Table: policy.New(cfg.Operations)}
}

// Live is the policy calls use now.
func (l *Step) Live() *Live { return l.live.Load() }

// SetLive makes p the policy of every call that starts from now on.
func (l *Step) SetLive(p *Live) { l.live.Store(p) }
