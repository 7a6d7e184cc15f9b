// Package policy is the live policy: the operation table (for each
// procedure of the API, which service-account roles may call it, its rate,
// stream cap and quota, and whether Idempotency-Key applies), the plans and
// per-subject quotas, and the one mapping of a plan and its operations to
// the rate limits and quotas that enforce them (Rates, QuotaOf), which the
// limit step and the operator API both read. A reload builds a new Live and
// swaps it in whole (Current). It is data from config; this package only
// looks it up.
//
// It enforces nothing: the limit step (edge/limits) admits calls under a
// Live, and ratelimit and quota count in Redis. People are not judged
// here: organization roles belong to the backend, which owns membership.
package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/identity"
)

// Rule is one procedure's row of the operation table.
type Rule struct {
	config.Operation
	// Builtin: one of the edge's own procedures (config.BuiltinProcedures),
	// answered by the edge from memory: not charged to any plan.
	Builtin bool
	// Open: the procedure needs no token, and what has no subject has no
	// plan: neither authenticated nor limited nor charged (gRPC's health
	// service, which probes call without one). The chain's other bounds
	// apply.
	Open bool
}

// Allows reports whether p may call the procedure: a person always (the
// backend decides), a service account when it holds one of the roles.
func (r *Rule) Allows(p *identity.Principal) bool {
	if !p.ServiceAccount() {
		return true
	}
	return slices.ContainsFunc(r.ServiceAccountRoles, p.HasRole)
}

// LimitsRunning reports whether the rule limits running its operation, not
// only calling it: the operation's own rate, or an environment it reserves.
// A retry answered from a kept outcome runs nothing again, so those limits
// do not apply to it (limits.Step.AdmitReplay).
func (r *Rule) LimitsRunning() bool {
	return r.RatePerMinute > 0 || r.Quota == config.QuotaReserveEnvironment
}

// ReasonMissingRole refuses a service account none of whose roles the
// procedure's rule names.
const ReasonMissingRole = "MISSING_ROLE"

// Refusal is the refusal of p's call of procedure under r (permission
// denied, ReasonMissingRole, naming the roles that would do), or nil when
// r allows p.
func (r *Rule) Refusal(p *identity.Principal, procedure string) *connect.Error {
	if r.Allows(p) {
		return nil
	}
	return apierror.New(connect.CodePermissionDenied, ReasonMissingRole,
		fmt.Sprintf("%s needs one of the roles %s", procedure, strings.Join(r.ServiceAccountRoles, ", ")),
		apierror.WithMetadata("required_roles", strings.Join(r.ServiceAccountRoles, ",")))
}

// Table maps procedures to rules.
type Table struct {
	rules map[string]*Rule
	// builtins are the rules of config.BuiltinProcedures, which the edge
	// answers itself: any caller with a valid token (a service account of
	// any role the table names), read-only, each open stream counted
	// against the subject's stream cap (the largest concurrent_streams of
	// the table, which every stream of the subject shares), and a rate of
	// their own, not the plan's (edge/limits); gRPC's health service is
	// open to any caller, token or not (Rule.Open).
	builtins map[string]*Rule
}

// New builds the table from validated configuration.
func New(ops []config.Operation) *Table {
	t := &Table{rules: make(map[string]*Rule, len(ops)), builtins: map[string]*Rule{}}
	var roles []string
	streams := 0
	for _, op := range ops {
		op.ServiceAccountRoles = slices.Clone(op.ServiceAccountRoles)
		t.rules[op.Procedure] = &Rule{Operation: op}
		for _, r := range op.ServiceAccountRoles {
			if !slices.Contains(roles, r) {
				roles = append(roles, r)
			}
		}
		streams = max(streams, op.ConcurrentStreams)
	}
	slices.Sort(roles)
	for name, info := range config.BuiltinProcedures {
		t.builtins[name] = &Rule{Operation: config.Operation{Procedure: name, ServiceAccountRoles: roles, ReadOnly: true, ConcurrentStreams: streams},
			Builtin: true, Open: info.Service == config.HealthService}
	}
	return t
}

// Rule returns the procedure's rule. A procedure without a row is refused
// to service accounts and open to people, but config validation makes sure
// every procedure has one.
func (t *Table) Rule(procedure string) *Rule {
	if r, ok := t.rules[procedure]; ok {
		return r
	}
	if r, ok := t.builtins[procedure]; ok {
		return r
	}
	return &Rule{Operation: config.Operation{Procedure: procedure}}
}

// Operations returns every row of the table, by procedure.
func (t *Table) Operations() []config.Operation {
	out := make([]config.Operation, 0, len(t.rules))
	for _, name := range slices.Sorted(maps.Keys(t.rules)) {
		out = append(out, t.rules[name].Operation)
	}
	return out
}
