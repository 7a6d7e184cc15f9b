package quota

import (
	"fmt"
	"time"
)

// Kind names one environment or compute quota.
type Kind string

// Kinds of quota, in the order Reserve checks them: when several are
// exhausted, the first is reported.
const (
	ConcurrentEnvironments Kind = "concurrent_environments"
	EnvironmentsPerMonth   Kind = "environments_per_month"
	VCPUHoursPerMonth      Kind = "vcpu_hours_per_month"
	MemoryGBHoursPerMonth  Kind = "memory_gb_hours_per_month"
)

// ErrorInfo reasons of a refused reservation.
const (
	ReasonEnvironmentQuota = "ENVIRONMENT_QUOTA_EXCEEDED" // concurrent or per month
	ReasonComputeQuota     = "COMPUTE_QUOTA_EXCEEDED"     // vCPU-hours or memory GB-hours
)

// QuotaError is a refused reservation: the caller answers resource_exhausted
// with ErrorInfo reason Reason and a google.rpc.QuotaFailure violation
// built from Subject and Description.
type QuotaError struct {
	Subject string
	Kind    Kind
	Reason  string
	// Limit and Used are in the quota's unit: environments, vCPU-hours or
	// memory GB-hours. Used ≥ Limit.
	Limit, Used float64
	// Description says, for a person, which quota and how much is used.
	Description string
	// RetryAt is when the quota renews (the first of next month, UTC, for
	// monthly quotas); zero for the concurrent quota, which frees up when
	// an environment is deleted.
	RetryAt time.Time
}

func (e *QuotaError) Error() string { return "quota: " + e.Description }

func quotaError(subject string, k Kind, limit, used float64, next time.Time) *QuotaError {
	e := &QuotaError{Subject: subject, Kind: k, Reason: ReasonComputeQuota, Limit: limit, Used: used, RetryAt: next}
	switch k {
	case ConcurrentEnvironments:
		e.Reason, e.RetryAt = ReasonEnvironmentQuota, time.Time{}
		e.Description = fmt.Sprintf("%g of %g concurrent environments in use; delete one to create another", used, limit)
		return e
	case EnvironmentsPerMonth:
		e.Reason = ReasonEnvironmentQuota
		e.Description = fmt.Sprintf("%g of %g environments created this month", used, limit)
	case VCPUHoursPerMonth:
		e.Description = fmt.Sprintf("%.2f of %g vCPU-hours used this month", used, limit)
	case MemoryGBHoursPerMonth:
		e.Description = fmt.Sprintf("%.2f of %g memory GB-hours used this month", used, limit)
	}
	e.Description += "; renews " + next.Format(time.RFC3339)
	return e
}
