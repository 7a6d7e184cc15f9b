package edge_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/orgedge/edge/config"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// textCall is a gRPC-Web text call as Google's grpc-web client makes it in
// text mode: the envelope in base64, here sent as two padded chunks as a
// client writing its body in parts does, and an answer read as it comes:
// every 4 characters that have arrived are decoded (chunk by chunk at
// padding), then the envelopes. It reads nothing into the edge's code.
type textCall struct {
	res    *http.Response
	body   *bufio.Reader
	raw    []byte // decoded, not yet parsed as envelopes
	b64    []byte // received, not yet decoded
	status string // grpc-status, from the trailers frame or the headers
}

func startTextCall(t *testing.T, base, procedure, token string, msg proto.Message, header ...string) *textCall {
	t.Helper()
	payload, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	env := append([]byte{0, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(env[1:5], uint32(len(payload)))
	cut := min(len(env), 7)
	body := base64.StdEncoding.EncodeToString(env[:cut]) + base64.StdEncoding.EncodeToString(env[cut:])
	r, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, base+procedure, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/grpc-web-text")
	r.Header.Set("Accept", "application/grpc-web-text")
	r.Header.Set("X-Grpc-Web", "1")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	res, err := testkit.HTTP1Client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc-web-text") {
		t.Fatalf("answer Content-Type %q, want application/grpc-web-text", ct)
	}
	return &textCall{res: res, body: bufio.NewReader(res.Body), status: res.Header.Get("Grpc-Status")}
}

// next returns the next message, or nil at the trailers frame (whose
// grpc-status it keeps) or the end of the answer.
func (c *textCall) next(t *testing.T) []byte {
	t.Helper()
	for {
		if len(c.raw) >= 5 {
			n := int(binary.BigEndian.Uint32(c.raw[1:5]))
			if len(c.raw) >= 5+n {
				flags, payload := c.raw[0], c.raw[5:5+n]
				c.raw = c.raw[5+n:]
				if flags&0x80 != 0 {
					for line := range strings.SplitSeq(string(payload), "\r\n") {
						if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "grpc-status") {
							c.status = strings.TrimSpace(v)
						}
					}
					return nil
				}
				return payload
			}
		}
		buf := make([]byte, 4096)
		n, err := c.body.Read(buf)
		c.b64 = append(c.b64, buf[:n]...)
		whole := len(c.b64) / 4 * 4
		for chunk := c.b64[:whole]; len(chunk) > 0; {
			end := len(chunk)
			if i := bytes.IndexByte(chunk, '='); i >= 0 {
				end = (i/4 + 1) * 4
			}
			dec, derr := base64.StdEncoding.DecodeString(string(chunk[:end]))
			if derr != nil {
				t.Fatalf("answer is not base64: %v (%q)", derr, chunk)
			}
			c.raw = append(c.raw, dec...)
			chunk = chunk[end:]
		}
		c.b64 = c.b64[whole:]
		if err == io.EOF && n == 0 && len(c.raw) < 5 {
			return nil
		}
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
	}
}

func textMessage[T any, PT interface {
	*T
	proto.Message
}](t *testing.T, c *textCall) PT {
	t.Helper()
	payload := c.next(t)
	if payload == nil {
		t.Fatalf("no message; grpc-status %q", c.status)
	}
	m := PT(new(T))
	if err := proto.Unmarshal(payload, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// end reads the answer to its end and returns its grpc-status.
func (c *textCall) end(t *testing.T) string {
	t.Helper()
	for c.next(t) != nil {
	}
	return c.status
}

// TestGRPCWebTextUnaryStreamErrorsReplaysAndQuotas: a gRPC-Web text client
// (base64 bodies, in padded chunks) creates an organization, has the same
// Idempotency-Key replayed, reads the backend's error and the edge's own
// refusals as grpc-status, is refused its third environment by the free
// plan's quota, and watches an environment message by message until it is
// deleted. Before, the backend answered 415 (after the edge had charged
// the call).
func TestGRPCWebTextUnaryStreamErrorsReplaysAndQuotas(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{ProvisionDelay: time.Hour, WatchPoll: 50 * time.Millisecond}, nil)
	base := s.edge.URL
	tok := token("free-text")

	// Unary, with an Idempotency-Key, then its replay.
	create := &svcv1.CreateOrganizationRequest{Name: "text-mode", BillingEmail: "a@b.example"}
	first := startTextCall(t, base, "/svc.v1.OrganizationService/CreateOrganization", tok, create, "Idempotency-Key", "text-1")
	org := textMessage[svcv1.Organization](t, first)
	if st := first.end(t); st != "0" || org.Name != "text-mode" {
		t.Fatalf("create: grpc-status %q, %v", st, org)
	}
	again := startTextCall(t, base, "/svc.v1.OrganizationService/CreateOrganization", tok, create, "Idempotency-Key", "text-1")
	if got := textMessage[svcv1.Organization](t, again); got.Id != org.Id || again.res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %v, Idempotent-Replayed %q; want %s replayed", got, again.res.Header.Get("Idempotent-Replayed"), org.Id)
	}
	if st := again.end(t); st != "0" {
		t.Fatalf("replay grpc-status %q", st)
	}

	// The backend's error, and the edge's own refusal (Trailers-Only).
	missing := startTextCall(t, base, "/svc.v1.OrganizationService/GetOrganization", tok, &svcv1.GetOrganizationRequest{OrganizationId: "00000000-0000-0000-0000-000000000000"})
	if st := missing.end(t); st != strconv.Itoa(int(connect.CodeNotFound)) && st != strconv.Itoa(int(connect.CodePermissionDenied)) {
		t.Fatalf("a missing organization: grpc-status %q, want not_found or permission_denied", st)
	}
	anon := startTextCall(t, base, "/svc.v1.OrganizationService/ListOrganizations", "", &svcv1.ListOrganizationsRequest{})
	if st := anon.end(t); st != strconv.Itoa(int(connect.CodeUnauthenticated)) {
		t.Fatalf("without a token: grpc-status %q, want unauthenticated", st)
	}

	// The free plan's quota: two concurrent environments, the third refused.
	c := testkit.NewClients(base, testkit.ConnectProto, tok)
	prj, err := c.Org.CreateProject(ctxT(t), req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	var envs []string
	for i := range 3 {
		call := startTextCall(t, base, "/svc.v1.EnvironmentService/CreateEnvironment", tok,
			&svcv1.CreateEnvironmentRequest{Name: "e" + strconv.Itoa(i), BlueprintId: "redis-7", ProjectId: prj.Msg.Id})
		if i < 2 {
			res := textMessage[svcv1.CreateEnvironmentResponse](t, call)
			if st := call.end(t); st != "0" {
				t.Fatalf("environment %d: grpc-status %q", i+1, st)
			}
			envs = append(envs, res.Environment.Id)
			continue
		}
		if st := call.end(t); st != strconv.Itoa(int(connect.CodeResourceExhausted)) {
			t.Fatalf("third environment: grpc-status %q, want resource_exhausted", st)
		}
	}

	// A stream: each message arrives decodable as it is sent (the first
	// one while the environment is still provisioning, for an hour), until
	// the environment is deleted.
	watch := startTextCall(t, base, "/svc.v1.EnvironmentService/WatchEnvironment", tok, &svcv1.WatchEnvironmentRequest{EnvironmentId: envs[0]})
	if m := textMessage[svcv1.WatchEnvironmentResponse](t, watch); m.Status != "PROVISIONING" {
		t.Fatalf("first message %v, want PROVISIONING", m)
	}
	if _, err := c.Env.DeleteEnvironment(ctxT(t), req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: envs[0]})); err != nil {
		t.Fatal(err)
	}
	if m := textMessage[svcv1.WatchEnvironmentResponse](t, watch); m.Status != "DELETED" {
		t.Fatalf("after the delete: %v, want DELETED", m)
	}
	if st := watch.end(t); st != "0" {
		t.Fatalf("watch ended with grpc-status %q", st)
	}
}

// TestGRPCWebTextBodiesAreBoundedAndCheckedLikeBinaryOnes: a text body
// whose decoded size passes requests.max_body_bytes is refused like a
// binary one (resource_exhausted), and one that is not base64 is refused
// as invalid_argument, neither reaching the backend.
func TestGRPCWebTextBodiesAreBoundedAndCheckedLikeBinaryOnes(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, func(c *config.Config) { c.Requests.MaxBodyBytes = 2 * config.KiB })
	tok := token("pro-text-bounds")
	post := func(body string) string {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, s.edge.URL+"/svc.v1.OrganizationService/CreateOrganization", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/grpc-web-text+proto")
		r.Header.Set("Authorization", "Bearer "+tok)
		res, err := testkit.HTTP1Client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		c := &textCall{res: res, body: bufio.NewReader(res.Body), status: res.Header.Get("Grpc-Status")}
		return c.end(t)
	}
	big := &svcv1.CreateOrganizationRequest{Name: strings.Repeat("x", 3000), BillingEmail: "a@b.example"}
	payload, _ := proto.Marshal(big)
	env := append([]byte{0, 0, 0, 0, 0}, payload...)
	binary.BigEndian.PutUint32(env[1:5], uint32(len(payload)))
	if st := post(base64.StdEncoding.EncodeToString(env)); st != strconv.Itoa(int(connect.CodeResourceExhausted)) {
		t.Errorf("a body of %d bytes decoded, over 2KiB: grpc-status %q, want resource_exhausted", len(env), st)
	}
	if st := post("AAAA!!!!"); st != strconv.Itoa(int(connect.CodeInvalidArgument)) {
		t.Errorf("a body that is not base64: grpc-status %q, want invalid_argument", st)
	}
}
