package main

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/orgedge/edge/edge/apierror"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// refusingServer answers every call with what refuse writes, over HTTP/1.1
// and cleartext HTTP/2, as the edge listens.
func refusingServer(t *testing.T, refuse http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(refuse)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// edgeLike writes err with the edge's own error writer, after the rate limit
// headers unless bare.
func edgeLike(err *connect.Error, bare bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !bare {
			h := w.Header()
			h.Set("X-RateLimit-Limit", "60")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", "1790000000")
			h.Set("RateLimit-Policy", `"plan";q=60;w=60, "daily";q=10000;w=86400`)
			h.Set("RateLimit", `"plan";r=0;t=2, "daily";r=9890;t=40000`)
		}
		apierror.Write(w, r, err)
	}
}

func rateLimited(opts ...apierror.Option) *connect.Error {
	return apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "rate limit of the free plan exceeded; retry after 2s",
		append([]apierror.Option{apierror.WithMetadata("limit", "plan"), apierror.WithMetadata("plan", "free")}, opts...)...)
}

// callThrough makes one call in p to base as the load does, and returns
// what was recorded.
func callThrough(t *testing.T, base string, p Protocol) Result {
	t.Helper()
	tr := newTransports(4)
	t.Cleanup(tr.close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, res := unary[svcv1.ListOrganizationsRequest, svcv1.ListOrganizationsResponse](ctx, newTarget("edge", base, p, tr),
		svcv1connect.OrganizationServiceListOrganizationsProcedure, "token", &svcv1.ListOrganizationsRequest{}, nil)
	return res
}

func TestRefusalsAreJudgedAsTheirProtocolCarriesThem(t *testing.T) {
	wellFormed := rateLimited(apierror.WithRetryAfter(1500 * time.Millisecond))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    []string // problems; none for a well-formed refusal
	}{
		{"the edge's refusal", edgeLike(wellFormed, false), nil},
		{"without rate limit headers", edgeLike(wellFormed, true),
			[]string{"no X-RateLimit-Limit header", "no X-RateLimit-Remaining header", "no X-RateLimit-Reset header", "RateLimit header", "no RateLimit-Policy header"}},
		{"without Retry-After and RetryInfo", edgeLike(rateLimited(), false), []string{"no Retry-After", "no RetryInfo detail"}},
		{"Retry-After disagreeing with RetryInfo", edgeLike(rateLimited(
			apierror.WithDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)}), apierror.WithHeader("Retry-After", "5")), false),
			[]string{"differs from Retry-After 5s"}},
		{"Retry-After of zero", edgeLike(rateLimited(
			apierror.WithDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(0)}), apierror.WithHeader("Retry-After", "0")), false),
			[]string{`Retry-After "0"`, "RetryInfo delay 0s"}},
		{"another reason", edgeLike(apierror.New(connect.CodeResourceExhausted, "REQUEST_TOO_LARGE", "too large", apierror.WithRetryAfter(time.Second)), false),
			[]string{`reason "REQUEST_TOO_LARGE"`}},
		{"no ErrorInfo", edgeLike(func() *connect.Error {
			e := connect.NewError(connect.CodeResourceExhausted, io.EOF)
			d, _ := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
			e.AddDetail(d)
			e.Meta().Set("Retry-After", "1")
			return e
		}(), false), []string{"0 ErrorInfo details"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := refusingServer(t, tc.handler)
			for _, p := range allProtocols {
				t.Run(string(p), func(t *testing.T) {
					res := callThrough(t, base, p)
					if res.outcome() != Refused {
						t.Fatalf("outcome %v (%v), want refused", res.outcome(), res.Err)
					}
					got := checkRefusal(res.X, rateRefusal)
					if len(tc.want) == 0 && len(got) > 0 {
						t.Fatalf("a well-formed refusal was judged malformed: %q\nstatus %d\nheader %v\ntrailer %v\nbody %q", got, res.X.Status, res.X.Header, res.X.Trailer, res.X.Body)
					}
					for _, w := range tc.want {
						if !strings.Contains(strings.Join(got, "; "), w) {
							t.Errorf("problems %q do not mention %q", got, w)
						}
					}
				})
			}
		})
	}
}

func TestARefusalInTheWrongStatusIsMalformed(t *testing.T) {
	unavailable := apierror.New(connect.CodeUnavailable, "RATE_LIMIT_EXCEEDED", "no", apierror.WithRetryAfter(time.Second))
	base := refusingServer(t, edgeLike(unavailable, false))
	for p, want := range map[Protocol]string{
		Connect: "HTTP status 503, want 429", ConnectJSON: "code unavailable", HTTPJSON: "HTTP status 503",
		GRPC: `grpc-status "14"`, GRPCWeb: `grpc-status "14"`,
	} {
		t.Run(string(p), func(t *testing.T) {
			res := callThrough(t, base, p)
			if res.outcome() != Failed {
				t.Fatalf("outcome %v, want failed", res.outcome())
			}
			if got := strings.Join(checkRefusal(res.X, rateRefusal), "; "); !strings.Contains(got, want) {
				t.Fatalf("problems %q, want %q", got, want)
			}
		})
	}
}

func TestAGRPCWebRefusalWithItsStatusInTheBodysTrailerFrame(t *testing.T) {
	info, _ := anypb.New(&errdetails.ErrorInfo{Reason: "RATE_LIMIT_EXCEEDED", Domain: "edge"})
	retry, _ := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)})
	st, _ := proto.Marshal(&statuspb.Status{Code: 8, Message: "slow down", Details: []*anypb.Any{info, retry}})
	trailer := "grpc-status: 8\r\ngrpc-message: slow down\r\ngrpc-status-details-bin: " + connect.EncodeBinaryHeader(st) + "\r\nretry-after: 2\r\n"
	frame := make([]byte, 5, 5+len(trailer))
	frame[0] = 0x80
	binary.BigEndian.PutUint32(frame[1:], uint32(len(trailer)))
	frame = append(frame, trailer...)
	x := &Exchange{Protocol: GRPCWeb, Status: 200, Body: frame, Header: http.Header{
		"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1790000000"},
		"Ratelimit": {`"plan";r=0;t=2`}, "Ratelimit-Policy": {`"plan";q=60;w=60`},
	}}
	if got := checkRefusal(x, rateRefusal); len(got) > 0 {
		t.Fatalf("problems %q", got)
	}
	x.Body = frame[:len(frame)-3]
	if got := checkRefusal(x, rateRefusal); !strings.Contains(strings.Join(got, ";"), "truncated") {
		t.Fatalf("a truncated frame: %q", got)
	}
}

func TestAJSONRefusalInTheSpecificationsOwnDetailForm(t *testing.T) {
	body := `{"code":"resource_exhausted","message":"slow down","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"DAILY_LIMIT_EXCEEDED","domain":"edge"},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}`
	x := &Exchange{Protocol: HTTPJSON, Status: 429, Body: []byte(body), Header: http.Header{
		"Retry-After": {"3600"}, "X-Ratelimit-Limit": {"10000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1790000000"},
		"Ratelimit": {`"daily";r=0;t=3600`}, "Ratelimit-Policy": {`"daily";q=10000;w=86400`},
	}}
	if got := checkRefusal(x, rateRefusal); len(got) > 0 {
		t.Fatalf("problems %q", got)
	}
	x.Body = []byte(`<html>Too Many Requests</html>`)
	if got := strings.Join(checkRefusal(x, rateRefusal), ";"); !strings.Contains(got, "not JSON") {
		t.Fatalf("an HTML 429: %q", got)
	}
}

func TestRateLimitFieldIsReadByLimitName(t *testing.T) {
	field := `"plan";r=57;t=3, "daily";r=9990;t=42000, "op:SearchCatalog";r=29;t=2`
	for name, want := range map[string]int{"plan": 57, "daily": 9990, "op:SearchCatalog": 29, "other": -1} {
		if got := rateLimitRemaining(field, name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
}
