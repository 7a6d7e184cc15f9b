package edge

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/edge/ratelimit"
	"github.com/orgedge/edge/edge/result"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
)

// usageProcedure is answered by the edge itself, from its own counters.
const usageProcedure = svcv1connect.UsageServiceGetUsageProcedure

type usageKey struct{}

// usageCall is the caller of GetUsage and what the limit step decided.
type usageCall struct {
	principal *identity.Principal
	admitted  *admission
}

// usageHandler serves GetUsage in every protocol connect-go speaks.
func usageHandler(l *Limits) http.Handler {
	_, h := svcv1connect.NewUsageServiceHandler(usageService{l})
	return h
}

type usageService struct{ l *Limits }

func (u usageService) GetUsage(ctx context.Context, _ *connect.Request[svcv1.GetUsageRequest]) (*connect.Response[svcv1.GetUsageResponse], error) {
	c, _ := ctx.Value(usageKey{}).(*usageCall)
	if c == nil {
		return nil, apierror.New(connect.CodeInternal, "INTERNAL", "usage asked outside the edge's chain")
	}
	d := c.admitted.decision
	today, month := d.Today, d.Month
	if d.Source != ratelimit.SourceRedis {
		used, err := u.l.Rates.Usage(ctx, c.principal.Subject)
		if err != nil {
			return nil, apierror.New(connect.CodeUnavailable, reasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
		}
		today, month = used.Today, used.Month
	}
	envs, err := u.l.Envs.Usage(ctx, c.principal.Subject)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, apierror.New(connect.CodeUnavailable, reasonUnavailable, "usage cannot be read now (Redis unavailable); retry later")
	}
	plan := c.admitted.limits
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
		},
	}), nil
}

func clamp32(n int64) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}

// serveUsage answers GetUsage. A JSON caller's error is reshaped as the
// backend's are (see modifyResponse): connect-go's handler writes Connect's
// JSON error, without the "@type" fields every other error of the API
// carries.
func (s *Server) serveUsage(w *recorder, r *http.Request, call classify.Call) {
	if !call.UnaryConnect || !call.JSON {
		s.usage.ServeHTTP(w, r)
		return
	}
	a := &bufferedAnswer{header: w.Header()}
	s.usage.ServeHTTP(a, r)
	body := a.body.Bytes()
	if a.status != 0 && a.status != http.StatusOK {
		code, _ := result.Of(call, result.Answer{Status: a.status, Header: a.header, Body: body, Written: int64(len(body))})
		w.code = result.CodeName(code) // the edge's own answer
		if out, ok := apierror.RewriteJSON(body); ok {
			body = out
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	if a.status != 0 {
		w.WriteHeader(a.status)
	}
	_, _ = w.Write(body)
}

// bufferedAnswer keeps a small answer (GetUsage's) whole, to reshape it
// before it goes out. Its header map is the client's.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *bufferedAnswer) Header() http.Header { return a.header }

func (a *bufferedAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *bufferedAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}
