package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/proxy"
	"github.com/orgedge/edge/edge/wire"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

const createOrg = svcv1connect.OrganizationServiceCreateOrganizationProcedure

// stack is the real issuer and backend, with a stoppable, counting server
// of the backend's handler that a chain of the edge's steps forwards to.
type stack struct {
	t        *testing.T
	issuer   string
	verifier *identity.Verifier
	procs    wire.Procedures
	eligible map[string]bool

	backendAddr string
	handler     http.Handler // the backend's
	mu          sync.Mutex
	srv         *http.Server
	hits        sync.Map // procedure → *atomic.Int64: calls that reached the backend
}

func newStack(t *testing.T) *stack {
	t.Helper()
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	v, err := identity.NewVerifier(identity.Config{IssuerURL: iss.URL(), Audience: devissuer.DefaultAudience})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, issuer: iss.URL(), verifier: v, procs: wire.Procedures{}, eligible: map[string]bool{}, handler: be.Service.Handler()}
	for name, info := range config.Procedures() {
		s.procs[name] = info.Streaming()
	}
	for _, op := range config.DefaultOperations() {
		s.eligible[op.Procedure] = op.Idempotent
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.backendAddr = ln.Addr().String()
	s.serveBackend(ln)
	t.Cleanup(s.stopBackend)
	return s
}

// serveBackend serves the backend's handler, counting calls per procedure.
func (s *stack) serveBackend(ln net.Listener) {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		s.handler.ServeHTTP(w, r)
	})
	srv := orgsvc.NewServer("", counted)
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// stopBackend takes the backend down: its port refuses connections.
func (s *stack) stopBackend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// restartBackend serves the backend again on the same port.
func (s *stack) restartBackend() {
	s.t.Helper()
	ln, err := net.Listen("tcp", s.backendAddr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.backendAddr, err)
	}
	s.serveBackend(ln)
}

func (s *stack) backendHits(procedure string) int64 {
	n, ok := s.hits.Load(procedure)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// front is a server running the edge's steps up to this one, then the step,
// then the edge's proxy to the backend.
type front struct {
	URL string
	// gate, when set, runs before each forwarded call (to hold it).
	gate     atomic.Pointer[func()]
	mu       sync.Mutex
	outcomes []idempotency.Outcome
}

func (s *stack) front(step *idempotency.Step) *front {
	t := s.t
	t.Helper()
	f := &front{}
	up, _ := url.Parse("http://" + s.backendAddr)
	p := proxy.New(proxy.Options{
		Upstream:    up,
		DialTimeout: time.Second,
		// The edge's answer for a backend it cannot reach.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			apierror.Write(w, r, apierror.New(connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE", "the backend is unavailable; retry later"))
		},
	})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := f.gate.Load(); g != nil {
			(*g)()
		}
		p.ServeHTTP(w, r)
	})
	chain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, problem := wire.Classify(r, s.procs)
		if problem != 0 {
			http.Error(w, "unclassified", http.StatusBadRequest)
			return
		}
		pr, err := s.verifier.Authenticate(r.Context(), r.Header)
		if err != nil {
			apierror.Write(w, r, apierror.New(connect.CodeUnauthenticated, "TOKEN_INVALID", err.Error()))
			return
		}
		out, refusal := step.Serve(w, r, call, pr.Subject, s.eligible[call.Procedure], false, next)
		if refusal != nil { // the chain writes the step's refusals
			apierror.Write(w, r, refusal)
		}
		f.mu.Lock()
		f.outcomes = append(f.outcomes, out)
		f.mu.Unlock()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := orgsvc.NewServer("", chain)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	f.URL = "http://" + ln.Addr().String()
	return f
}

func (f *front) seen() []idempotency.Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.outcomes)
}

// person returns a new subject's name and token.
func (s *stack) person() (subject, token string) {
	name := testenv.Unique("free")
	token = testkit.Token(s.t, s.issuer, name)
	p, err := s.verifier.Verify(context.Background(), token)
	if err != nil {
		s.t.Fatal(err)
	}
	return p.Subject, token
}

func newStep(t *testing.T, rdb redis.UniversalClient, opts idempotency.Options) *idempotency.Step {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second // the race detector is slow
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return idempotency.New(rdb, opts)
}

// exchange is one answer as the client's transport received it.
type exchange struct {
	status          int
	header, trailer http.Header
	body            []byte
}

// recording is a client transport that keeps the raw answers.
type recording struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  []exchange
}

func (rt *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := rt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	rt.got = append(rt.got, exchange{res.StatusCode, res.Header.Clone(), res.Trailer.Clone(), body})
	rt.mu.Unlock()
	res.Body = io.NopCloser(bytes.NewReader(body)) // res.Trailer is filled: the body was read to EOF
	return res, nil
}

func (rt *recording) exchanges() []exchange {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.got)
}

// orgClient calls baseURL in protocol p through rt (when not nil).
func orgClient(baseURL string, p testkit.Protocol, rt *recording) svcv1connect.OrganizationServiceClient {
	hc := testkit.HTTP1Client
	if p == testkit.GRPC {
		hc = testkit.H2CClient
	}
	if rt != nil {
		rt.base = hc.Transport
		hc = &http.Client{Transport: rt}
	}
	if p == testkit.HTTPJSON {
		return &testkit.JSONClient{HTTP: hc, BaseURL: baseURL}
	}
	var opts []connect.ClientOption
	switch p {
	case testkit.ConnectJSON:
		opts = append(opts, connect.WithProtoJSON())
	case testkit.GRPC:
		opts = append(opts, connect.WithGRPC())
	case testkit.GRPCWeb:
		opts = append(opts, connect.WithGRPCWeb())
	}
	return svcv1connect.NewOrganizationServiceClient(hc, baseURL, opts...)
}

// create calls CreateOrganization with the token and, when not empty, the
// key. It returns the answer's headers (the error's metadata on failure).
func create(t *testing.T, c svcv1connect.OrganizationServiceClient, token, key, name string) (*svcv1.Organization, http.Header, error) {
	t.Helper()
	req := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: name, BillingEmail: "billing@example.com"})
	req.Header().Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header().Set(idempotency.HeaderKey, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.CreateOrganization(ctx, req)
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, ce.Meta(), err
		}
		return nil, nil, err
	}
	return res.Msg, res.Header(), nil
}

// wantError asserts the code and the ErrorInfo reason a user sees.
func wantError(t *testing.T, err error, code connect.Code, reason string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a %v error", err, code)
	}
	if ce.Code() != code {
		t.Fatalf("got %v: %s, want %v", ce.Code(), ce.Message(), code)
	}
	if reason == "" {
		return ce
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok && ei.Reason == reason {
				return ce
			}
		}
	}
	t.Fatalf("%v error %q has no ErrorInfo with reason %s", ce.Code(), ce.Message(), reason)
	return nil
}

func wantOutcomes(t *testing.T, f *front, want ...idempotency.Outcome) {
	t.Helper()
	// The front notes an outcome after the step has answered, so the
	// client may read the answer first: wait for the notes to catch up.
	got := f.seen()
	for deadline := time.Now().Add(10 * time.Second); len(got) < len(want) && time.Now().Before(deadline); got = f.seen() {
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}

// sameAnswer compares a first answer and its replay as the client's
// transport got them, all but the headers that are the current request's.
func sameAnswer(t *testing.T, first, replay exchange) {
	t.Helper()
	if got := replay.header.Get(idempotency.HeaderReplayed); got != "true" {
		t.Errorf("replay: %s %q, want true", idempotency.HeaderReplayed, got)
	}
	if first.header.Get(idempotency.HeaderReplayed) != "" {
		t.Errorf("first answer carries %s", idempotency.HeaderReplayed)
	}
	strip := func(h http.Header) http.Header {
		h = h.Clone()
		h.Del("Date")
		h.Del(idempotency.HeaderReplayed)
		return h
	}
	if first.status != replay.status {
		t.Errorf("status %d, replay %d", first.status, replay.status)
	}
	if a, b := strip(first.header), strip(replay.header); !maps.EqualFunc(a, b, slices.Equal) {
		t.Errorf("headers differ:\nfirst  %v\nreplay %v", a, b)
	}
	if !bytes.Equal(first.body, replay.body) {
		t.Errorf("bodies differ:\nfirst  %q\nreplay %q", first.body, replay.body)
	}
	if !maps.EqualFunc(first.trailer, replay.trailer, slices.Equal) {
		t.Errorf("trailers differ:\nfirst  %v\nreplay %v", first.trailer, replay.trailer)
	}
}

func forEachRedis(t *testing.T, test func(t *testing.T, rdb redis.UniversalClient)) {
	for _, name := range []string{"redis", "cluster"} {
		t.Run(name, func(t *testing.T) {
			test(t, testenv.RedisTargets()[name](t))
		})
	}
}

func TestFiftyConcurrentCreatesWithOneKeyRunOnceAndGetTheAnswerOrAborted(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := newStack(t)
		f := s.front(newStep(t, rdb, idempotency.Options{}))
		_, token := s.person()
		key, name := testenv.Unique("key"), testenv.Unique("org")
		c := orgClient(f.URL, testkit.ConnectJSON, nil)

		const n = 50
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			orgs    = make([]*svcv1.Organization, n)
			errs    = make([]error, n)
			headers = make([]http.Header, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				orgs[i], headers[i], errs[i] = create(t, c, token, key, name)
			})
		}
		close(start)
		wg.Wait()

		var id string
		answered, aborted := 0, 0
		for i := range n {
			if errs[i] != nil {
				wantError(t, errs[i], connect.CodeAborted, idempotency.ReasonInUse)
				aborted++
				continue
			}
			if id == "" {
				id = orgs[i].Id
			}
			if orgs[i].Id != id || orgs[i].Name != name {
				t.Fatalf("caller %d got organization %s %q, another got %s", i, orgs[i].Id, orgs[i].Name, id)
			}
			answered++
		}
		if answered == 0 {
			t.Fatalf("all %d callers got aborted", n)
		}
		if got := s.backendHits(createOrg); got != 1 {
			t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
		}

		org, h, err := create(t, c, token, key, name)
		if err != nil {
			t.Fatalf("a later call: %v", err)
		}
		if org.Id != id || h.Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("a later call got %s (%s %q), want the replay of %s", org.Id, idempotency.HeaderReplayed, h.Get(idempotency.HeaderReplayed), id)
		}

		// The backend holds one organization of that name.
		req := connect.NewRequest(&svcv1.ListOrganizationsRequest{})
		req.Header().Set("Authorization", "Bearer "+token)
		list, err := c.ListOrganizations(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := list.Msg.Organizations; len(got) != 1 || got[0].Id != id {
			t.Fatalf("the caller's organizations: %v, want only %s", got, id)
		}
		counts := map[idempotency.Outcome]int{}
		for _, o := range f.seen() {
			counts[o]++
		}
		if counts[idempotency.First] != 1 || counts[idempotency.InUse] != aborted || counts[idempotency.Replayed] != n-aborted {
			t.Fatalf("outcomes %v; %d callers aborted", counts, aborted)
		}
		t.Logf("%d callers answered (1 first, the rest replayed), %d aborted", answered, aborted)
	})
}

func TestReplayIsByteIdenticalInEveryProtocol(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := newStack(t)
		f := s.front(newStep(t, rdb, idempotency.Options{}))
		_, token := s.person()
		for _, p := range testkit.Protocols {
			t.Run(string(p), func(t *testing.T) {
				rt := &recording{}
				c := orgClient(f.URL, p, rt)
				key, name := testenv.Unique("key"), testenv.Unique("org")
				before := s.backendHits(createOrg)

				first, _, err := create(t, c, token, key, name)
				if err != nil {
					t.Fatal(err)
				}
				again, h, err := create(t, c, token, key, name)
				if err != nil {
					t.Fatalf("replay: %v", err)
				}
				if again.Id != first.Id || h.Get(idempotency.HeaderReplayed) != "true" {
					t.Fatalf("replay got %s with %s %q, want %s replayed", again.Id, idempotency.HeaderReplayed, h.Get(idempotency.HeaderReplayed), first.Id)
				}
				if got := s.backendHits(createOrg) - before; got != 1 {
					t.Fatalf("the backend ran the call %d times, want 1", got)
				}
				ex := rt.exchanges()
				if len(ex) != 2 {
					t.Fatalf("%d exchanges, want 2", len(ex))
				}
				if p == testkit.GRPC && ex[0].trailer.Get("Grpc-Status") != "0" {
					t.Fatalf("gRPC answer without grpc-status 0 in its trailers: %v", ex[0].trailer)
				}
				sameAnswer(t, ex[0], ex[1])
			})
		}
	})
}

func TestDeterministicErrorIsStoredAndReplayedInEveryProtocol(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := newStack(t)
		f := s.front(newStep(t, rdb, idempotency.Options{}))
		_, token := s.person()
		name := testenv.Unique("org")
		if _, _, err := create(t, orgClient(f.URL, testkit.ConnectProto, nil), token, "", name); err != nil {
			t.Fatal(err)
		}
		for _, p := range testkit.Protocols {
			t.Run(string(p), func(t *testing.T) {
				rt := &recording{}
				c := orgClient(f.URL, p, rt)
				key := testenv.Unique("key")
				before := s.backendHits(createOrg)

				_, _, err := create(t, c, token, key, name)
				first := wantError(t, err, connect.CodeAlreadyExists, "")
				_, h, err := create(t, c, token, key, name)
				again := wantError(t, err, connect.CodeAlreadyExists, "")
				if again.Message() != first.Message() || len(again.Details()) != len(first.Details()) {
					t.Fatalf("replayed error %q with %d details, first %q with %d", again.Message(), len(again.Details()), first.Message(), len(first.Details()))
				}
				if h.Get(idempotency.HeaderReplayed) != "true" {
					t.Fatalf("replayed error's metadata lacks %s: %v", idempotency.HeaderReplayed, h)
				}
				if got := s.backendHits(createOrg) - before; got != 1 {
					t.Fatalf("the backend ran the call %d times, want 1", got)
				}
				ex := rt.exchanges()
				if len(ex) != 2 {
					t.Fatalf("%d exchanges, want 2", len(ex))
				}
				sameAnswer(t, ex[0], ex[1])
			})
		}
	})
}

func TestKeyReusedWithAnotherBodyIsRefused(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		s := newStack(t)
		f := s.front(newStep(t, rdb, idempotency.Options{}))
		_, token := s.person()
		c := orgClient(f.URL, testkit.GRPC, nil)
		key := testenv.Unique("key")
		if _, _, err := create(t, c, token, key, testenv.Unique("org")); err != nil {
			t.Fatal(err)
		}
		_, _, err := create(t, c, token, key, testenv.Unique("org"))
		wantError(t, err, connect.CodeInvalidArgument, idempotency.ReasonReused)
		if got := s.backendHits(createOrg); got != 1 {
			t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
		}
		wantOutcomes(t, f, idempotency.First, idempotency.Reused)
	})
}

func TestSameKeyFromAnotherSubjectIsIndependent(t *testing.T) {
	s := newStack(t)
	f := s.front(newStep(t, testenv.Redis(t), idempotency.Options{}))
	_, alice := s.person()
	_, bob := s.person()
	c := orgClient(f.URL, testkit.ConnectJSON, nil)
	key := testenv.Unique("key")
	a, _, err := create(t, c, alice, key, testenv.Unique("org"))
	if err != nil {
		t.Fatal(err)
	}
	b, h, err := create(t, c, bob, key, testenv.Unique("org"))
	if err != nil {
		t.Fatalf("another subject with the same key: %v", err)
	}
	if a.Id == b.Id || h.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("another subject's call was replayed (%s, %s)", a.Id, b.Id)
	}
	wantOutcomes(t, f, idempotency.First, idempotency.First)
}

func TestSameKeyInAnotherProtocolIsRefusedNamingTheFirstContentType(t *testing.T) {
	s := newStack(t)
	f := s.front(newStep(t, testenv.Redis(t), idempotency.Options{}))
	_, token := s.person()
	key, name := testenv.Unique("key"), testenv.Unique("org")
	if _, _, err := create(t, orgClient(f.URL, testkit.HTTPJSON, nil), token, key, name); err != nil {
		t.Fatal(err)
	}
	_, _, err := create(t, orgClient(f.URL, testkit.GRPC, nil), token, key, name)
	ce := wantError(t, err, connect.CodeInvalidArgument, idempotency.ReasonReused)
	if !strings.Contains(ce.Message(), "application/json") {
		t.Fatalf("message %q does not name the first content type", ce.Message())
	}
	if got := s.backendHits(createOrg); got != 1 {
		t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
	}
}

func TestBackendDownFailsUnavailableAndARetryAfterItIsBackRunsOnce(t *testing.T) {
	s := newStack(t)
	rdb := testenv.Redis(t)
	f := s.front(newStep(t, rdb, idempotency.Options{}))
	subject, token := s.person()
	c := orgClient(f.URL, testkit.ConnectProto, nil)
	key, name := testenv.Unique("key"), testenv.Unique("org")

	s.stopBackend()
	_, _, err := create(t, c, token, key, name)
	wantError(t, err, connect.CodeUnavailable, "UPSTREAM_UNAVAILABLE")
	if n, err := rdb.Exists(context.Background(), idempotency.EntryKey(subject, createOrg, key)).Result(); err != nil || n != 0 {
		t.Fatalf("after a transient failure the key is still held (%d, %v)", n, err)
	}

	s.restartBackend()
	org, _, err := create(t, c, token, key, name)
	if err != nil {
		t.Fatalf("retry once the backend is back: %v", err)
	}
	again, h, err := create(t, c, token, key, name)
	if err != nil || again.Id != org.Id || h.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("duplicate after the retry: %v %v", again, err)
	}
	if got := s.backendHits(createOrg); got != 1 {
		t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
	}
	wantOutcomes(t, f, idempotency.NotStored, idempotency.First, idempotency.Replayed)
}

func TestStoredEntryExpiresAfterTheConfiguredPeriod(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		const ttl = 90 * time.Minute
		s := newStack(t)
		f := s.front(newStep(t, rdb, idempotency.Options{TTL: ttl}))
		subject, token := s.person()
		key := testenv.Unique("key")
		if _, _, err := create(t, orgClient(f.URL, testkit.GRPCWeb, nil), token, key, testenv.Unique("org")); err != nil {
			t.Fatal(err)
		}
		pttl, err := rdb.PTTL(context.Background(), idempotency.EntryKey(subject, createOrg, key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if pttl > ttl || pttl < ttl-time.Minute {
			t.Fatalf("PTTL %v, want just under %v", pttl, ttl)
		}
	})
}

func TestDuplicateWhileTheFirstRunsIsAbortedAndTheLeaseIsRenewed(t *testing.T) {
	// Long enough that a renewal (every lease/3) late by most of a second
	// on a loaded machine still lands in time; the test waits one lease.
	const lease = 2 * time.Second
	s := newStack(t)
	rdb := testenv.Redis(t)
	f := s.front(newStep(t, rdb, idempotency.Options{Lease: lease}))
	subject, token := s.person()
	key, name := testenv.Unique("key"), testenv.Unique("org")
	entry := idempotency.EntryKey(subject, createOrg, key)
	c := orgClient(f.URL, testkit.ConnectJSON, nil)

	held, release := make(chan struct{}), make(chan struct{})
	gate := func() { close(held); <-release }
	f.gate.Store(&gate)
	type result struct {
		org *svcv1.Organization
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		org, _, err := create(t, c, token, key, name)
		firstDone <- result{org, err}
	}()
	<-held
	f.gate.Store(nil)

	// The backend works longer than the lease: the reservation must be
	// there all along, renewed (never more than a lease ahead).
	reserved := time.Now()
	for time.Since(reserved) < lease+lease/2 {
		pttl, err := rdb.PTTL(context.Background(), entry).Result()
		if err != nil || pttl <= 0 || pttl > lease {
			t.Fatalf("after %v in flight the reservation's PTTL is %v (%v), want renewed within %v", time.Since(reserved), pttl, err, lease)
		}
		time.Sleep(lease / 20)
	}
	_, _, err := create(t, c, token, key, name)
	ce := wantError(t, err, connect.CodeAborted, idempotency.ReasonInUse)
	if ce.Meta().Get("Retry-After") == "" && len(ce.Details()) < 2 {
		t.Errorf("in-use error tells no retry delay")
	}

	close(release)
	first := <-firstDone
	if first.err != nil {
		t.Fatal(first.err)
	}
	again, _, err := create(t, c, token, key, name)
	if err != nil || again.Id != first.org.Id {
		t.Fatalf("after the first ended: %v %v, want the replay of %s", again, err, first.org.Id)
	}
	if got := s.backendHits(createOrg); got != 1 {
		t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
	}
	wantOutcomes(t, f, idempotency.InUse, idempotency.First, idempotency.Replayed)
}

func TestAbandonedReservationExpiresAfterItsLease(t *testing.T) {
	// Long enough for the first call to end and the second to find the
	// reservation on a loaded machine; the test waits for its expiry.
	const lease = 3 * time.Second
	s := newStack(t)
	rdb := testenv.Redis(t)
	subject, token := s.person()
	key, name := testenv.Unique("key"), testenv.Unique("org")
	entry := idempotency.EntryKey(subject, createOrg, key)

	// Edge A has a Redis connection of its own, which it loses while the
	// backend works: it can neither renew nor record, as if it had died.
	rdbA := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	a := s.front(newStep(t, rdbA, idempotency.Options{Lease: lease}))
	b := s.front(newStep(t, rdb, idempotency.Options{Lease: lease}))
	held, release := make(chan struct{}), make(chan struct{})
	gate := func() { close(held); <-release }
	a.gate.Store(&gate)
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := create(t, orgClient(a.URL, testkit.ConnectJSON, nil), token, key, name)
		firstDone <- err
	}()
	<-held
	_ = rdbA.Close()
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatalf("the first caller: %v", err)
	}

	cb := orgClient(b.URL, testkit.ConnectJSON, nil)
	_, _, err := create(t, cb, token, key, name)
	wantError(t, err, connect.CodeAborted, idempotency.ReasonInUse)
	pttl, err := rdb.PTTL(context.Background(), entry).Result()
	if err != nil || pttl <= 0 || pttl > lease {
		t.Fatalf("abandoned reservation PTTL %v (%v), want at most the lease %v", pttl, err, lease)
	}

	deadline := time.Now().Add(5 * lease)
	for rdb.Exists(context.Background(), entry).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned reservation outlived its lease")
		}
		time.Sleep(lease / 10)
	}
	// The documented window: the retry runs again, and the backend's own
	// check is what stands between it and a second organization.
	_, _, err = create(t, cb, token, key, name)
	wantError(t, err, connect.CodeAlreadyExists, "")
	wantOutcomes(t, a, idempotency.NotStored)
	wantOutcomes(t, b, idempotency.InUse, idempotency.First)
}

func TestResponseTooLargeToKeepIsNotRunAgain(t *testing.T) {
	s := newStack(t)
	f := s.front(newStep(t, testenv.Redis(t), idempotency.Options{MaxResponseBytes: 64}))
	_, token := s.person()
	c := orgClient(f.URL, testkit.ConnectJSON, nil)
	key, name := testenv.Unique("key"), testenv.Unique("org")
	if _, _, err := create(t, c, token, key, name); err != nil {
		t.Fatal(err)
	}
	_, _, err := create(t, c, token, key, name)
	ce := wantError(t, err, connect.CodeFailedPrecondition, idempotency.ReasonNotStored)
	if !strings.Contains(ce.Message(), "(ok)") {
		t.Errorf("message %q does not say how the first call ended", ce.Message())
	}
	if got := s.backendHits(createOrg); got != 1 {
		t.Fatalf("the backend ran CreateOrganization %d times, want 1", got)
	}
	wantOutcomes(t, f, idempotency.First, idempotency.TooLarge)
}

func TestRedisDownRefusesUnavailableOrForwardsWhenFailOpen(t *testing.T) {
	s := newStack(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = dead.Close() })
	_, token := s.person()

	closed := s.front(newStep(t, dead, idempotency.Options{}))
	start := time.Now()
	_, _, err := create(t, orgClient(closed.URL, testkit.GRPC, nil), token, testenv.Unique("key"), testenv.Unique("org"))
	wantError(t, err, connect.CodeUnavailable, idempotency.ReasonUnavailable)
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %v: an unreachable Redis must not hold the call", d)
	}
	if got := s.backendHits(createOrg); got != 0 {
		t.Fatalf("refused call reached the backend %d times", got)
	}

	open := s.front(newStep(t, dead, idempotency.Options{OnRedisFailure: config.FailOpen}))
	if _, _, err := create(t, orgClient(open.URL, testkit.GRPC, nil), token, testenv.Unique("key"), testenv.Unique("org")); err != nil {
		t.Fatalf("fail open: %v", err)
	}
	if got := s.backendHits(createOrg); got != 1 {
		t.Fatalf("fail open: the backend ran %d calls, want 1", got)
	}
	wantOutcomes(t, closed, idempotency.Unavailable)
	wantOutcomes(t, open, idempotency.Unavailable)
}

func TestKeyValues(t *testing.T) {
	s := newStack(t)
	f := s.front(newStep(t, testenv.Redis(t), idempotency.Options{}))
	_, token := s.person()
	c := orgClient(f.URL, testkit.ConnectJSON, nil)

	// An empty value must arrive as one: set it by hand.
	empty := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: testenv.Unique("org"), BillingEmail: "billing@example.com"})
	empty.Header().Set("Authorization", "Bearer "+token)
	empty.Header()[idempotency.HeaderKey] = []string{""}
	_, err := c.CreateOrganization(context.Background(), empty)
	wantError(t, err, connect.CodeInvalidArgument, idempotency.ReasonInvalid)
	for _, bad := range []string{`""`, strings.Repeat("k", 256), "schlüssel", `"open`, `"a"b"`, `"a\x"`} {
		_, _, err := create(t, c, token, bad, testenv.Unique("org"))
		wantError(t, err, connect.CodeInvalidArgument, idempotency.ReasonInvalid)
	}
	twice := connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: testenv.Unique("org"), BillingEmail: "billing@example.com"})
	twice.Header().Set("Authorization", "Bearer "+token)
	twice.Header().Add(idempotency.HeaderKey, "one")
	twice.Header().Add(idempotency.HeaderKey, "two")
	_, err = c.CreateOrganization(context.Background(), twice)
	wantError(t, err, connect.CodeInvalidArgument, idempotency.ReasonInvalid)
	if got := s.backendHits(createOrg); got != 0 {
		t.Fatalf("calls with invalid keys reached the backend %d times", got)
	}

	// A structured-field string and the same characters bare are one key.
	key, name := testenv.Unique("key"), testenv.Unique("org")
	first, _, err := create(t, c, token, `"`+key+`"`, name)
	if err != nil {
		t.Fatal(err)
	}
	again, h, err := create(t, c, token, key, name)
	if err != nil || again.Id != first.Id || h.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("bare key after the quoted one: %v %v, want the replay", again, err)
	}
	max, name := strings.Repeat("~", 255), testenv.Unique("org")
	if _, _, err := create(t, c, token, max, name); err != nil {
		t.Fatalf("255-character key: %v", err)
	}
}

func TestHeaderIsIgnoredWhereTheOperationTableDoesNotHonorIt(t *testing.T) {
	s := newStack(t)
	f := s.front(newStep(t, testenv.Redis(t), idempotency.Options{}))
	_, token := s.person()
	c := orgClient(f.URL, testkit.GRPCWeb, nil)
	key := testenv.Unique("key")
	for range 2 {
		req := connect.NewRequest(&svcv1.ListOrganizationsRequest{})
		req.Header().Set("Authorization", "Bearer "+token)
		req.Header().Set(idempotency.HeaderKey, key)
		res, err := c.ListOrganizations(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatal("a read was replayed")
		}
	}
	if got := s.backendHits(svcv1connect.OrganizationServiceListOrganizationsProcedure); got != 2 {
		t.Fatalf("the backend ran ListOrganizations %d times, want 2", got)
	}
	wantOutcomes(t, f, "", "")
}

// TestASubjectHoldsAtMostMaxKeysThenNewKeysAreRefusedWithRetryAfter: one
// subject may hold MaxKeysPerSubject keys at once; a new key past it is
// refused (resource_exhausted, IDEMPOTENCY_KEYS_EXHAUSTED, Retry-After
// until its oldest key expires) and does not reach the backend, while the
// keys it holds still replay, its calls without a key run, and another
// subject is not affected. Redis holds no more than the bound for it.
func TestASubjectHoldsAtMostMaxKeysThenNewKeysAreRefusedWithRetryAfter(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	rdb := testenv.Redis(t)
	prefix := testenv.Unique("idem-bound") + ":"
	step := newStep(t, rdb, idempotency.Options{MaxKeysPerSubject: 3, TTL: time.Hour, KeyPrefix: prefix})
	f := s.front(step)
	c := orgClient(f.URL, testkit.ConnectProto, nil)
	_, tok := s.person()

	first, _, err := create(t, c, tok, "k0", "bound-0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		if _, _, err := create(t, c, tok, fmt.Sprintf("k%d", i), fmt.Sprintf("bound-%d", i)); err != nil {
			t.Fatalf("key %d of 3: %v", i, err)
		}
	}
	before := s.backendHits(createOrg)
	_, meta, err := create(t, c, tok, "k3", "bound-3")
	ce := wantError(t, err, connect.CodeResourceExhausted, idempotency.ReasonKeysExhausted)
	if ra, _ := strconv.Atoi(meta.Get("Retry-After")); ra < 3500 || ra > 3600 {
		t.Errorf("Retry-After %q, want about an hour (the oldest key's TTL): %v", meta.Get("Retry-After"), ce)
	}
	if got := s.backendHits(createOrg); got != before {
		t.Errorf("the refused call reached the backend")
	}
	again, hdr, err := create(t, c, tok, "k0", "bound-0")
	if err != nil || again.Id != first.Id || hdr.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("a key the subject holds no longer replays: %v, %v", again, err)
	}
	if _, _, err := create(t, c, tok, "", "bound-nokey"); err != nil {
		t.Errorf("a call without a key: %v", err)
	}
	_, other := s.person()
	if _, _, err := create(t, c, other, "k3", "bound-other"); err != nil {
		t.Errorf("another subject's first key: %v", err)
	}
	keys, err := rdb.Keys(context.Background(), prefix+"idem:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	entries := 0
	for _, k := range keys {
		if !strings.HasSuffix(k, ":ledger") {
			entries++
		}
	}
	if entries != 4 {
		t.Errorf("Redis holds %d entries, want 4 (3 of one subject, 1 of the other): %v", entries, keys)
	}
}

func TestACallAdmittedAsAReplayWhoseOutcomeExpiredIsAbortedAndRunsNothing(t *testing.T) {
	step := newStep(t, testenv.Redis(t), idempotency.Options{})
	c := wire.Call{Protocol: wire.Connect, Procedure: createOrg, Service: "svc.v1.OrganizationService",
		Method: "CreateOrganization", JSON: true, UnaryConnect: true}
	key, subject := testenv.Unique("key"), testenv.Unique("subject")
	send := func(replayOnly bool) (idempotency.Outcome, *connect.Error, bool) {
		r := httptest.NewRequest(http.MethodPost, createOrg, strings.NewReader(`{"name":"acme"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderKey, key)
		ran := false
		next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			ran = true
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"org_1","name":"acme"}`))
		})
		out, refusal := step.Serve(httptest.NewRecorder(), r, c, subject, true, replayOnly, next)
		return out, refusal, ran
	}
	// The chain admitted the call as a replay, but no outcome is kept (it
	// expired between the look and the replay): it must not run without
	// the limits it skipped.
	out, refusal, ran := send(true)
	if ran || out != idempotency.NotStored {
		t.Fatalf("admitted as a replay with nothing kept: outcome %q, forwarded %v; want %q and not forwarded", out, ran, idempotency.NotStored)
	}
	wantError(t, refusal, connect.CodeAborted, idempotency.ReasonExpired)
	// Its key is free again: the retry, through every limit, runs.
	if out, refusal, ran := send(false); !ran || out != idempotency.First || refusal != nil {
		t.Fatalf("the retry: outcome %q, refusal %v, forwarded %v; want %q, none, forwarded", out, refusal, ran, idempotency.First)
	}
}
