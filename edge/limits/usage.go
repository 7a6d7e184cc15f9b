package limits

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/ratelimit"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
)

// UsageProcedure is answered by the edge itself, from its own counters
// (UsageHandler).
const UsageProcedure = svcv1connect.UsageServiceGetUsageProcedure

type usageKey struct{}

// usageCall is the caller of GetUsage and what the limit step decided.
type usageCall struct {
	principal *identity.Principal
	admitted  *Admission
	refused   func(*connect.Error)
}

// WithUsageCaller is ctx for UsageHandler: the caller of GetUsage and its
// admission. refused is told the error GetUsage answers, if it answers one,
// before it is written: in gRPC and gRPC-Web its code is in trailers the
// chain does not read, and the dependency it is about (Redis: limits'
// ReasonUnavailable) is in its ErrorInfo.
func WithUsageCaller(ctx context.Context, p *identity.Principal, a *Admission, refused func(*connect.Error)) context.Context {
	return context.WithValue(ctx, usageKey{}, &usageCall{p, a, refused})
}

// UsageHandler serves GetUsage in every protocol connect-go speaks, for a
// call admitted by the step (WithUsageCaller).
func (l *Step) UsageHandler() http.Handler {
	_, h := svcv1connect.NewUsageServiceHandler(usageService{l})
	return h
}

type usageService struct{ l *Step }

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
	d := c.admitted.decision
	today, month := d.Today, d.Month
	if d.Source != ratelimit.SourceRedis {
		used, err := u.l.Rates.Usage(ctx, c.principal.Subject)
		if err != nil {
			return nil, apierror.New(connect.CodeUnavailable, ReasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
		}
		today, month = used.Today, used.Month
	}
	envs, err := u.l.Envs.Usage(ctx, c.principal.Subject)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, apierror.New(connect.CodeUnavailable, ReasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
	}
	plan := c.admitted.limits
	// The quotas of the policy in force now (as the next CreateEnvironment
	// would be decided), for the plan the call was admitted under.
	q := u.l.Live().Limits.QuotasFor(c.principal.Subject, c.admitted.plan)
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
