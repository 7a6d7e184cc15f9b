package testkit

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

// Protocol names a way of calling the API.
type Protocol string

// The protocols a client may speak.
const (
	ConnectJSON  Protocol = "connect-json"
	ConnectProto Protocol = "connect-proto"
	GRPC         Protocol = "grpc"
	GRPCWeb      Protocol = "grpc-web"
	HTTPJSON     Protocol = "http-json" // plain net/http, no Connect library
)

// Protocols lists every protocol, for table-driven suites.
var Protocols = []Protocol{ConnectJSON, ConnectProto, GRPC, GRPCWeb, HTTPJSON}

// Streams reports whether the protocol's client can call streaming methods.
func (p Protocol) Streams() bool { return p != HTTPJSON }

// Clients holds one client per service, for one caller.
type Clients struct {
	Org       svcv1connect.OrganizationServiceClient
	Env       svcv1connect.EnvironmentServiceClient
	Blueprint svcv1connect.BlueprintServiceClient
	Usage     svcv1connect.UsageServiceClient
}

// HTTP1Client speaks HTTP/1.1; H2CClient speaks cleartext HTTP/2 only.
var (
	HTTP1Client = &http.Client{Transport: &http.Transport{}}
	H2CClient   = func() *http.Client {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: &http.Transport{Protocols: &p}}
	}()
)

// NewClients returns clients that call baseURL in protocol p, sending token
// as a bearer token when it is not empty. gRPC goes over HTTP/2 cleartext,
// the others over HTTP/1.1.
func NewClients(baseURL string, p Protocol, token string) Clients {
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	if p == HTTPJSON {
		c := &JSONClient{HTTP: HTTP1Client, BaseURL: baseURL, Header: header}
		return Clients{Org: c, Env: c, Blueprint: c, Usage: c}
	}
	hc := HTTP1Client
	if p == GRPC {
		hc = H2CClient
	}
	return NewClientsWith(hc, baseURL, p, token)
}

// NewClientsWith is NewClients over an HTTP client of the caller's (one
// that speaks HTTP/2 for gRPC), for a connect-go protocol (not HTTPJSON),
// with more connect-go options, e.g. connect.WithSendGzip() to compress
// every request (in gRPC, the server then compresses its answers too).
func NewClientsWith(hc *http.Client, baseURL string, p Protocol, token string, more ...connect.ClientOption) Clients {
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	opts := []connect.ClientOption{connect.WithInterceptors(headerInterceptor(header))}
	switch p {
	case ConnectJSON:
		opts = append(opts, connect.WithProtoJSON())
	case GRPC:
		opts = append(opts, connect.WithGRPC())
	case GRPCWeb:
		opts = append(opts, connect.WithGRPCWeb())
	}
	opts = append(opts, more...)
	return Clients{
		Org:       svcv1connect.NewOrganizationServiceClient(hc, baseURL, opts...),
		Env:       svcv1connect.NewEnvironmentServiceClient(hc, baseURL, opts...),
		Blueprint: svcv1connect.NewBlueprintServiceClient(hc, baseURL, opts...),
		Usage:     svcv1connect.NewUsageServiceClient(hc, baseURL, opts...),
	}
}

// headerInterceptor adds fixed headers to every request.
type headerInterceptor http.Header

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		for k, vs := range h {
			req.Header()[k] = vs
		}
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		for k, vs := range h {
			conn.RequestHeader()[k] = vs
		}
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
