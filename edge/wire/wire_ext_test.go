package wire_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// recorder keeps the last raw answer that passed through it. Unless
// compressed is set it strips the client's compression headers, so that the
// backend answers uncompressed.
type recorder struct {
	base       http.RoundTripper
	compressed bool
	mu         sync.Mutex
	res        *http.Response
	body       *bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if !r.compressed {
		for _, h := range wire.CompressionHeaders {
			req.Header.Del(h)
		}
	}
	res, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	r.mu.Lock()
	r.res, r.body = res, buf
	r.mu.Unlock()
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, buf), res.Body}
	return res, nil
}

func TestUnaryMessageReadsSuccessInEveryProtocolAndSeesFailures(t *testing.T) {
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	tok := testkit.Token(t, iss.URL(), "carol")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	org, err := testkit.NewClients(be.URL, testkit.ConnectProto, tok).Org.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "wire", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call wire.Call
		opts []connect.ClientOption
		h2   bool
	}{
		{"ConnectProto", wire.Call{Protocol: wire.Connect, UnaryConnect: true}, nil, false},
		{"ConnectJSON", wire.Call{Protocol: wire.Connect, UnaryConnect: true, JSON: true}, []connect.ClientOption{connect.WithProtoJSON()}, false},
		{"GRPC", wire.Call{Protocol: wire.GRPC}, []connect.ClientOption{connect.WithGRPC()}, true},
		{"GRPCJSON", wire.Call{Protocol: wire.GRPC, JSON: true}, []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()}, true},
		{"GRPCWeb", wire.Call{Protocol: wire.GRPCWeb}, []connect.ClientOption{connect.WithGRPCWeb()}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := testkit.HTTP1Client.Transport
			if c.h2 {
				base = testkit.H2CClient.Transport
			}
			rec := &recorder{base: base}
			client := svcv1connect.NewOrganizationServiceClient(&http.Client{Transport: rec}, be.URL, c.opts...)
			call := func(id string) (*http.Response, []byte, error) {
				r := connect.NewRequest(&svcv1.GetOrganizationRequest{OrganizationId: id})
				r.Header().Set("Authorization", "Bearer "+tok)
				_, err := client.GetOrganization(ctx, r)
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return rec.res, rec.body.Bytes(), err
			}
			res, body, err := call(org.Msg.Id)
			if err != nil {
				t.Fatal(err)
			}
			got := new(svcv1.Organization)
			if err := wire.UnaryMessage(c.call, res, body, wire.OfResponse(c.call, res, body), got); err != nil || got.Id != org.Msg.Id {
				t.Fatalf("read %v, %v", got, err)
			}
			res, body, _ = call("org_missing")
			if err := wire.UnaryMessage(c.call, res, body, wire.OfResponse(c.call, res, body), new(svcv1.Organization)); !errors.Is(err, wire.ErrFailed) {
				t.Fatalf("a failed call read as %v", err)
			}
		})
	}
}

func TestUnaryMessageReadsGzipAnswersInEveryProtocol(t *testing.T) {
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	tok := testkit.Token(t, iss.URL(), "carol")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cases := []struct {
		name string
		call wire.Call
		opts []connect.ClientOption
		h2   bool
		head string // the header that names the answer's compression
	}{
		{"ConnectProto", wire.Call{Protocol: wire.Connect, UnaryConnect: true}, nil, false, "Content-Encoding"},
		{"ConnectJSON", wire.Call{Protocol: wire.Connect, UnaryConnect: true, JSON: true}, []connect.ClientOption{connect.WithProtoJSON()}, false, "Content-Encoding"},
		{"GRPC", wire.Call{Protocol: wire.GRPC}, []connect.ClientOption{connect.WithGRPC()}, true, "Grpc-Encoding"},
		{"GRPCWeb", wire.Call{Protocol: wire.GRPCWeb}, []connect.ClientOption{connect.WithGRPCWeb()}, false, "Grpc-Encoding"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := testkit.HTTP1Client.Transport
			if c.h2 {
				base = testkit.H2CClient.Transport
			}
			rec := &recorder{base: base, compressed: true}
			opts := append([]connect.ClientOption{connect.WithSendGzip()}, c.opts...)
			client := svcv1connect.NewOrganizationServiceClient(&http.Client{Transport: rec}, be.URL, opts...)
			r := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "gzip-" + strings.ToLower(c.name), BillingEmail: "a@b.example"})
			r.Header().Set("Authorization", "Bearer "+tok)
			org, err := client.CreateOrganization(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if enc := rec.res.Header.Get(c.head); enc != "gzip" {
				t.Fatalf("the backend answered %s %q, want gzip: the test reads nothing compressed", c.head, enc)
			}
			got := new(svcv1.Organization)
			if err := wire.UnaryMessage(c.call, rec.res, rec.body.Bytes(), wire.OfResponse(c.call, rec.res, rec.body.Bytes()), got); err != nil || got.Id != org.Msg.Id {
				t.Fatalf("read %v, %v", got, err)
			}
		})
	}
}

func TestUnaryMessageRefusesToInflatePastItsBound(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(make([]byte, wire.MaxMessageBytes+1))
	_ = zw.Close()
	frame := append([]byte{1, 0, 0, 0, 0}, zipped.Bytes()...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(zipped.Len()))
	res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Grpc-Encoding": {"gzip"}}, Trailer: http.Header{"Grpc-Status": {"0"}}}
	err := wire.UnaryMessage(wire.Call{Protocol: wire.GRPC}, res, frame, wire.OfResponse(wire.Call{Protocol: wire.GRPC}, res, frame), new(svcv1.Organization))
	if !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("a 1 MiB bomb read as %v, want ErrTooLarge", err)
	}
	res.Header.Set("Grpc-Encoding", "snappy")
	if err := wire.UnaryMessage(wire.Call{Protocol: wire.GRPC}, res, frame, wire.OfResponse(wire.Call{Protocol: wire.GRPC}, res, frame), new(svcv1.Organization)); err == nil || errors.Is(err, wire.ErrFailed) {
		t.Fatalf("an unknown compression read as %v, want an error that is not ErrFailed", err)
	}
}

// TestUnaryMessageRefusesBodiesThatAreNotOneMessage: a unary answer whose
// envelopes are not one message (and, in gRPC-Web, its trailers) is not
// read, and is not taken for a failed call either.
func TestUnaryMessageRefusesBodiesThatAreNotOneMessage(t *testing.T) {
	msg, _ := proto.Marshal(&svcv1.Organization{Id: "org_1"})
	ok := wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 0\r\n"))
	join := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	grpcOK := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Trailer: http.Header{"Grpc-Status": {"0"}}}
	webOK := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	grpc, web := wire.Call{Protocol: wire.GRPC}, wire.Call{Protocol: wire.GRPCWeb}
	for _, tt := range []struct {
		name string
		call wire.Call
		res  *http.Response
		body []byte
		want error // nil: any error but ErrFailed
	}{
		{"gRPC, two messages", grpc, grpcOK, join(wire.Envelope(0, msg), wire.Envelope(0, msg)), nil},
		{"gRPC, cut short", grpc, grpcOK, wire.Envelope(0, msg)[:4], nil},
		{"gRPC, a trailers frame", grpc, grpcOK, wire.Envelope(wire.FlagTrailer, msg), nil},
		{"gRPC-Web, two messages", web, webOK, join(wire.Envelope(0, msg), wire.Envelope(0, msg), ok), nil},
		{"gRPC-Web, a message after its trailers", web, webOK, join(ok, wire.Envelope(0, msg)), nil},
		{"gRPC-Web, cut short", web, webOK, join(wire.Envelope(0, msg), ok)[:8], nil},
		{"gRPC-Web, no message", web, webOK, ok, wire.ErrFailed},
		{"gRPC-Web, an error in its trailers", web, webOK, join(wire.Envelope(0, msg), wire.Envelope(wire.FlagTrailer, []byte("grpc-status: 5\r\n"))), wire.ErrFailed},
	} {
		err := wire.UnaryMessage(tt.call, tt.res, tt.body, wire.OfResponse(tt.call, tt.res, tt.body), new(svcv1.Organization))
		if tt.want != nil && !errors.Is(err, tt.want) || tt.want == nil && (err == nil || errors.Is(err, wire.ErrFailed)) {
			want := "an error that is not ErrFailed"
			if tt.want != nil {
				want = tt.want.Error()
			}
			t.Errorf("%s: %v, want %s", tt.name, err, want)
		}
	}
	got := new(svcv1.Organization)
	body := join(wire.Envelope(0, msg), ok)
	if err := wire.UnaryMessage(web, webOK, body, wire.OfResponse(web, webOK, body), got); err != nil || got.Id != "org_1" {
		t.Fatalf("a whole gRPC-Web answer read as %v, %v", got, err)
	}
}
