// Package usage answers UsageService/GetUsage, the procedure the edge serves
// itself, from its own counters: the caller's calls today and this month
// (the rate limiter's), its environments and compute (the quotas'), and its
// plan's limits and quotas under the policy in force. It runs once the
// limit step admitted the call (GetUsage counts against the plan like any
// call), in every protocol connect-go speaks, and reshapes a JSON caller's
// errors as the backend's are.
//
// It is not where those counters are kept (edge/ratelimit, edge/quota) or
// decided (edge/limits), nor the backend's business: GetUsage never reaches
// the backend.
package usage

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/ratelimit"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
)

// Procedure is answered by the edge itself, from its own counters.
const Procedure = svcv1connect.UsageServiceGetUsageProcedure

type usageKey struct{}

// usageCall is the caller of GetUsage and what the limit step decided.
type usageCall struct {
	principal *identity.Principal
	admitted  *limits.Admission
	// refused is told the error GetUsage answers, if it answers one,
	// before it is written: the dependency it is about (Redis: limits'
	// ReasonUnavailable) is in its ErrorInfo (call.Recorder.End).
	refused func(*connect.Error)
}

// Step answers GetUsage.
type Step struct {
	h http.Handler // connect-go's, every protocol
}

// New returns the step, reading the counters and the live policy of l.
func New(l *limits.Step) *Step {
	_, h := svcv1connect.NewUsageServiceHandler(usageService{l})
	return &Step{h: h}
}

type usageService struct{ l *limits.Step }

func (u usageService) GetUsage(ctx context.Context, _ *connect.Request[svcv1.GetUsageRequest]) (*connect.Response[svcv1.GetUsageResponse], error) {
	c, _ := ctx.Value(usageKey{}).(*usageCall)
	if c == nil {
		return nil, apierror.New(connect.CodeInternal, "INTERNAL", "usage asked outside the edge's chain")
	}
	res, err := u.usage(ctx, c)
	if ce := (*connect.Error)(nil); errors.As(err, &ce) && c.refused != nil {
		c.refused(ce)
	}
	return res, err
}

func (u usageService) usage(ctx context.Context, c *usageCall) (*connect.Response[svcv1.GetUsageResponse], error) {
	d := c.admitted.Decision()
	today, month := d.Today, d.Month
	if d.Source != ratelimit.SourceRedis {
		used, err := u.l.Rates.Usage(ctx, c.principal.Subject)
		if err != nil {
			return nil, apierror.New(connect.CodeUnavailable, limits.ReasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
		}
		today, month = used.Today, used.Month
	}
	envs, err := u.l.Envs.Usage(ctx, c.principal.Subject)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, apierror.New(connect.CodeUnavailable, limits.ReasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
	}
	planName, plan := c.admitted.Plan()
	// The quotas of the policy in force now (as the next CreateEnvironment
	// would be decided), for the plan the call was admitted under.
	q := u.l.Live().Limits.QuotasFor(c.principal.Subject, planName)
	return connect.NewResponse(&svcv1.GetUsageResponse{
		ApiUsage: &svcv1.ApiUsage{
			RequestsToday:     clamp32(today),
			RequestsThisMonth: clamp32(month),
			Limits: &svcv1.UsageLimits{
				RequestsPerMinute: int32(plan.RequestsPerMinute),
				RequestsPerDay:    int32(plan.RequestsPerDay),
			},
		},
		ResourceUsage: &svcv1.ResourceUsage{
			Environments:  int32(envs.Environments),
			VcpuHours:     envs.VCPUHours,
			MemoryGbHours: envs.MemoryGBHours,
			Quotas: &svcv1.ResourceQuotas{ // config.Unlimited is 0, as the API says
				ConcurrentEnvironments: int32(q.ConcurrentEnvironments),
				EnvironmentsPerMonth:   int32(q.EnvironmentsPerMonth),
				VcpuHoursPerMonth:      float64(q.VCPUHoursPerMonth),
				MemoryGbHoursPerMonth:  float64(q.MemoryGBHoursPerMonth),
			},
		},
	}), nil
}

func clamp32(n int64) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}
