package config

import "strings"

// PlanFor returns the plan of a subject, in the design's order: the plan
// named by the token's plan claim (lowercased) if it is a configured plan;
// else the subject's SubjectPlans entry; else DefaultPlan. claim is the
// claim's value, "" when the token carries none; subject is the token's
// sub. A claim naming no configured plan counts as no claim.
//
// On a validated Limits the plan returned is always configured.
func (l Limits) PlanFor(claim, subject string) (name string, plan Plan) {
	if claim != "" {
		name = strings.ToLower(claim)
		if p, ok := l.Plans[name]; ok {
			return name, p
		}
	}
	if subject != "" {
		if name, ok := l.SubjectPlans[subject]; ok {
			if p, ok := l.Plans[name]; ok {
				return name, p
			}
		}
	}
	return l.DefaultPlan, l.Plans[l.DefaultPlan]
}

// QuotasFor returns the quotas of a subject on the plan named planName (as
// PlanFor returns it): the subject's SubjectQuotas entry, which replaces the
// plan's quotas whole, else the plan's. A planName that is not configured
// gets DefaultPlan's quotas rather than none, which would be Unlimited.
func (l Limits) QuotasFor(subject, planName string) Quotas {
	if subject != "" {
		if q, ok := l.SubjectQuotas[subject]; ok {
			return q
		}
	}
	if p, ok := l.Plans[planName]; ok {
		return p.Quotas
	}
	return l.Plans[l.DefaultPlan].Quotas
}
