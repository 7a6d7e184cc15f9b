package apierror_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/orgedge/edge/edge/apierror"
)

const procedure = "/svc.v1.TestService/Call"

func rateLimited() *connect.Error {
	return apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "rate limit exceeded: 60 requests per minute",
		apierror.WithRetryAfter(12*time.Second))
}

// lastResponse records the last response a client received, so that a test
// can look at the HTTP status, headers and trailers under a Connect client.
type lastResponse struct {
	next http.RoundTripper
	mu   sync.Mutex
	resp *http.Response
}

func (l *lastResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	l.mu.Lock()
	l.resp = resp
	l.mu.Unlock()
	return resp, err
}

func (l *lastResponse) get() *http.Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resp
}

// startServer serves h over HTTP/2 (TLS, as gRPC needs) and returns a
// client for it that records its last response.
func startServer(t *testing.T, h http.Handler) (*httptest.Server, *http.Client, *lastResponse) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	rec := &lastResponse{next: srv.Client().Transport}
	return srv, &http.Client{Transport: rec}, rec
}

func writeRateLimited() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, rateLimited())
	})
}

func TestRateLimitedCallerSeesCodeReasonAndRetryAfterInEveryProtocol(t *testing.T) {
	cases := []struct {
		name       string
		opts       []connect.ClientOption
		stream     bool
		wantStatus int
		// grpcStatus is where grpc-status is expected: "trailer", "header" or "".
		grpcStatus string
	}{
		{"ConnectJSON", []connect.ClientOption{connect.WithProtoJSON()}, false, 429, ""},
		{"ConnectProto", nil, false, 429, ""},
		{"ConnectProtoGet", []connect.ClientOption{connect.WithHTTPGet()}, false, 429, ""},
		{"ConnectStream", nil, true, 200, ""},
		{"ConnectStreamJSON", []connect.ClientOption{connect.WithProtoJSON()}, true, 200, ""},
		// gRPC: Trailers-Only (the status in the one header block), so
		// that a client's retry policy may retry the call.
		{"GRPC", []connect.ClientOption{connect.WithGRPC()}, false, 200, "header"},
		{"GRPCJSON", []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()}, false, 200, "header"},
		{"GRPCStream", []connect.ClientOption{connect.WithGRPC()}, true, 200, "header"},
		{"GRPCWeb", []connect.ClientOption{connect.WithGRPCWeb()}, false, 200, "header"},
	}
	srv, httpClient, rec := startServer(t, writeRateLimited())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := append([]connect.ClientOption{connect.WithIdempotency(connect.IdempotencyNoSideEffects)}, c.opts...)
			client := connect.NewClient[emptypb.Empty, emptypb.Empty](httpClient, srv.URL+procedure, opts...)
			var err error
			if c.stream {
				stream, serr := client.CallServerStream(t.Context(), connect.NewRequest(&emptypb.Empty{}))
				if serr != nil {
					t.Fatalf("CallServerStream: %v", serr)
				}
				if stream.Receive() {
					t.Fatal("received a message; want the error")
				}
				err = stream.Err()
				_ = stream.Close()
			} else {
				_, err = client.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{}))
			}
			assertRateLimited(t, err)

			resp := rec.get()
			if resp.StatusCode != c.wantStatus {
				t.Errorf("HTTP status %d, want %d", resp.StatusCode, c.wantStatus)
			}
			if resp.ProtoMajor != 2 {
				t.Errorf("served over HTTP/%d, want HTTP/2", resp.ProtoMajor)
			}
			switch c.grpcStatus {
			case "trailer":
				if got := resp.Trailer.Get("Grpc-Status"); got != "8" {
					t.Errorf("grpc-status trailer %q, want 8", got)
				}
			case "header":
				if got := resp.Header.Get("Grpc-Status"); got != "8" {
					t.Errorf("grpc-status header %q, want 8", got)
				}
			}
			if strings.HasPrefix(c.name, "GRPC") && !strings.HasPrefix(c.name, "GRPCWeb") {
				if len(resp.Trailer) != 0 {
					t.Errorf("trailers %v after a Trailers-Only response", resp.Trailer)
				}
				if got := resp.Header.Get("Grpc-Retry-Pushback-Ms"); got != "12000" {
					t.Errorf("grpc-retry-pushback-ms %q, want 12000 (Retry-After)", got)
				}
			}
			if c.wantStatus == 429 && resp.Header.Get("Retry-After") != "12" {
				t.Errorf("Retry-After header %q, want 12", resp.Header.Get("Retry-After"))
			}
		})
	}
}

// assertRateLimited checks what a Connect client shows of rateLimited().
func assertRateLimited(t *testing.T, err error) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *connect.Error", err)
	}
	if ce.Code() != connect.CodeResourceExhausted {
		t.Errorf("code %v, want resource_exhausted", ce.Code())
	}
	if ce.Message() != "rate limit exceeded: 60 requests per minute" {
		t.Errorf("message %q", ce.Message())
	}
	var infos []*errdetails.ErrorInfo
	var delay time.Duration
	for _, d := range ce.Details() {
		v, verr := d.Value()
		if verr != nil {
			t.Fatalf("detail %s: %v", d.Type(), verr)
		}
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			infos = append(infos, v)
		case *errdetails.RetryInfo:
			delay = v.GetRetryDelay().AsDuration()
		}
	}
	if len(infos) != 1 {
		t.Fatalf("%d ErrorInfo details, want exactly 1", len(infos))
	}
	if infos[0].GetReason() != "RATE_LIMIT_EXCEEDED" || infos[0].GetDomain() != apierror.Domain {
		t.Errorf("ErrorInfo reason %q domain %q", infos[0].GetReason(), infos[0].GetDomain())
	}
	if delay != 12*time.Second {
		t.Errorf("RetryInfo delay %v, want 12s", delay)
	}
	if got := ce.Meta().Get("Retry-After"); got != "12" {
		t.Errorf("Retry-After metadata %q, want 12", got)
	}
}

func TestPlainJSONCallerGets429WithSpecShapedBody(t *testing.T) {
	get := "?" + url.Values{"connect": {"v1"}, "encoding": {"json"}, "message": {"{}"}}.Encode()
	cases := []struct {
		name, method, query, contentType string
	}{
		{"JSON", http.MethodPost, "", "application/json"},
		{"JSONCharset", http.MethodPost, "", "application/json; charset=utf-8"},
		{"JSONCharsetUpper", http.MethodPost, "", "Application/JSON; Charset=UTF-8"},
		{"ConnectGetJSON", http.MethodGet, get, ""},
	}
	srv, httpClient, _ := startServer(t, writeRateLimited())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.method == http.MethodPost {
				body = strings.NewReader("{}")
			}
			req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL+procedure+c.query, body)
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("status %d, want 429", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			if got := resp.Header.Get("Retry-After"); got != "12" {
				t.Errorf("Retry-After %q, want 12", got)
			}
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			assertSpecShape(t, raw)
		})
	}
}

// assertSpecShape checks the JSON body of rateLimited() key by key.
func assertSpecShape(t *testing.T, raw []byte) {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body %s: %v", raw, err)
	}
	if got := sortedKeys(body); !slices.Equal(got, []string{"code", "details", "message"}) {
		t.Errorf("body keys %v, want code, details, message", got)
	}
	if string(body["code"]) != `"resource_exhausted"` {
		t.Errorf("code %s", body["code"])
	}
	if string(body["message"]) != `"rate limit exceeded: 60 requests per minute"` {
		t.Errorf("message %s", body["message"])
	}
	var details []map[string]any
	if err := json.Unmarshal(body["details"], &details); err != nil {
		t.Fatalf("details %s: %v", body["details"], err)
	}
	want := []map[string]any{
		{"type": "google.rpc.ErrorInfo", "@type": "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": "RATE_LIMIT_EXCEEDED", "domain": "edge"},
		{"type": "google.rpc.RetryInfo", "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"},
	}
	if len(details) != len(want) {
		t.Fatalf("%d details, want %d: %s", len(details), len(want), body["details"])
	}
	wantValues := []proto.Message{
		&errdetails.ErrorInfo{Reason: "RATE_LIMIT_EXCEEDED", Domain: "edge"},
		&errdetails.RetryInfo{},
	}
	for i, d := range details {
		value, _ := d["value"].(string)
		delete(d, "value")
		for k, v := range want[i] {
			if d[k] != v {
				t.Errorf("details[%d][%q] = %v, want %v", i, k, d[k], v)
			}
		}
		if got, wantKeys := sortedKeys(d), sortedKeys(want[i]); !slices.Equal(got, wantKeys) {
			t.Errorf("details[%d] keys %v (besides value), want %v", i, got, wantKeys)
		}
		bin, err := base64.RawStdEncoding.DecodeString(value)
		if err != nil {
			t.Errorf("details[%d].value %q is not unpadded standard base64: %v", i, value, err)
		}
		msg := wantValues[i].ProtoReflect().New().Interface()
		if err := proto.Unmarshal(bin, msg); err != nil {
			t.Errorf("details[%d].value: %v", i, err)
		}
		if info, ok := msg.(*errdetails.ErrorInfo); ok && info.GetReason() != "RATE_LIMIT_EXCEEDED" {
			t.Errorf("details[%d].value holds reason %q", i, info.GetReason())
		}
		if retry, ok := msg.(*errdetails.RetryInfo); ok && retry.GetRetryDelay().AsDuration() != 12*time.Second {
			t.Errorf("details[%d].value holds delay %v", i, retry.GetRetryDelay().AsDuration())
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestJSONStatusAndHeadersMatchConnectForEveryCode holds the JSON writer to
// connect-go's own: same HTTP status and same headers for every code, for
// the edge's errors and for wire errors (whose metadata are not sent).
func TestJSONStatusAndHeadersMatchConnectForEveryCode(t *testing.T) {
	codes := []connect.Code{0, 99}
	for c := connect.CodeCanceled; c <= connect.CodeUnauthenticated; c++ {
		codes = append(codes, c)
	}
	for _, code := range codes {
		for _, wire := range []bool{false, true} {
			name := code.String()
			if wire {
				name += "/wire"
			}
			t.Run(name, func(t *testing.T) {
				newErr := func() *connect.Error {
					err := apierror.New(code, "REASON", "message", apierror.WithHeader("WWW-Authenticate", `Bearer error="invalid_token"`),
						apierror.WithHeader("Content-Type", "text/html"))
					if wire {
						w := connect.NewWireError(code, errors.New("message"))
						w.Meta().Set("X-From-Upstream", "1")
						return w
					}
					return err
				}
				req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				ours, theirs := httptest.NewRecorder(), httptest.NewRecorder()
				apierror.Write(ours, req, newErr())
				if err := connect.NewErrorWriter().Write(theirs, req, newErr()); err != nil {
					t.Fatal(err)
				}
				if ours.Code != theirs.Code {
					t.Errorf("status %d, connect-go writes %d", ours.Code, theirs.Code)
				}
				if !equalHeaders(ours.Header(), theirs.Header()) {
					t.Errorf("headers %v, connect-go writes %v", ours.Header(), theirs.Header())
				}
			})
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestUnservedContentTypeGets415WithAcceptPostLikeConnect(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("hello"))
	req.Header.Set("Content-Type", "text/plain")
	apierror.Write(rec, req, rateLimited())
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d, want 415", rec.Code)
	}
	wantReason(t, rec, "UNSUPPORTED_MEDIA_TYPE")
	ours := strings.Split(rec.Header().Get("Accept-Post"), ", ")
	if !slices.IsSorted(ours) {
		t.Errorf("Accept-Post %v is not sorted as connect-go sorts it", ours)
	}
	// Every content type connect-go's unary and streaming handlers accept
	// is served by the edge.
	noop := func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}
	stream := func(context.Context, *connect.Request[emptypb.Empty], *connect.ServerStream[emptypb.Empty]) error {
		return nil
	}
	for _, h := range []http.Handler{
		connect.NewUnaryHandler(procedure, noop),
		connect.NewServerStreamHandler(procedure, stream),
	} {
		theirs := httptest.NewRecorder()
		h.ServeHTTP(theirs, req)
		if theirs.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("connect-go answers %d", theirs.Code)
		}
		for ct := range strings.SplitSeq(theirs.Header().Get("Accept-Post"), ", ") {
			if !slices.Contains(ours, ct) {
				t.Errorf("connect-go accepts %q; Accept-Post %v does not list it", ct, ours)
			}
		}
	}
}

func TestUnservedCallsGetConnectsAnswers(t *testing.T) {
	cases := []struct {
		name, method, contentType string
		wantStatus                int
		wantHeader, wantValue     string
		wantReason                string
	}{
		{"NoContentType", http.MethodPost, "", 415, "Accept-Post", "", "UNSUPPORTED_MEDIA_TYPE"},
		{"UnservedCodec", http.MethodPost, "application/grpc+xml", 415, "Accept-Post", "", "UNSUPPORTED_MEDIA_TYPE"},
		{"BadContentType", http.MethodPost, "application/json; charset", 415, "Accept-Post", "", "UNSUPPORTED_MEDIA_TYPE"},
		{"Put", http.MethodPut, "application/json", 405, "Allow", "GET, POST", "METHOD_NOT_ALLOWED"},
		{"Delete", http.MethodDelete, "", 405, "Allow", "GET, POST", "METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(c.method, procedure, nil)
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			apierror.Write(rec, req, rateLimited())
			if rec.Code != c.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, c.wantStatus)
			}
			if got := rec.Header().Get(c.wantHeader); got == "" || (c.wantValue != "" && got != c.wantValue) {
				t.Errorf("%s %q, want %q", c.wantHeader, got, c.wantValue)
			}
			wantReason(t, rec, c.wantReason)
		})
	}
}

func TestGRPCWebTextCallerGetsTrailersOnlyResponse(t *testing.T) {
	for _, ct := range []string{"application/grpc-web-text", "application/grpc-web-text+proto"} {
		t.Run(ct, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("AAAAAAA="))
			req.Header.Set("Content-Type", ct)
			apierror.Write(rec, req, rateLimited())
			h := rec.Header()
			if rec.Code != http.StatusOK || h.Get("Content-Type") != ct {
				t.Errorf("status %d Content-Type %q, want 200 %s", rec.Code, h.Get("Content-Type"), ct)
			}
			if h.Get("Grpc-Status") != "8" || h.Get("Retry-After") != "12" || h.Get("Grpc-Status-Details-Bin") == "" {
				t.Errorf("headers %v, want grpc-status 8, details and Retry-After 12", h)
			}
			if rec.Body.Len() != 0 {
				t.Errorf("body %q, want none (trailers-only)", rec.Body)
			}
			if req.Header.Get("Content-Type") != ct {
				t.Errorf("request Content-Type changed to %q", req.Header.Get("Content-Type"))
			}
		})
	}
}

func TestUnauthenticatedPlainCallerSeesWWWAuthenticate(t *testing.T) {
	err := apierror.New(connect.CodeUnauthenticated, "TOKEN_MISSING", "missing bearer token",
		apierror.WithHeader("WWW-Authenticate", `Bearer error="invalid_token"`))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	apierror.Write(rec, req, err)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", rec.Code)
	}
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	want := `{"code":"unauthenticated","message":"missing bearer token","details":[{"type":"google.rpc.ErrorInfo",` +
		`"value":"Cg1UT0tFTl9NSVNTSU5HEgRlZGdl","@type":"type.googleapis.com/google.rpc.ErrorInfo",` +
		`"reason":"TOKEN_MISSING","domain":"edge"}]}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

func TestWriteNilIsInternal(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, procedure, bytes.NewReader(nil))
	req.Header.Set("Content-Type", "application/grpc")
	apierror.Write(rec, req, nil)
	if got := rec.Header().Get("Grpc-Status"); got != "13" {
		t.Errorf("grpc-status %q, want 13 (internal)", got)
	}
}

// Every delay, asked for once or many times, below or above the hour whose
// RetryInfos are kept marshalled, reaches the caller as its whole seconds
// in both the RetryInfo detail and Retry-After, and the detail's bytes are
// the message's own.
func TestRetryInfoSaysEachDelayHoweverOftenItIsAsked(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, time.Second, 59200 * time.Millisecond, time.Hour, time.Hour + time.Second, 31 * 24 * time.Hour} {
		want := (d + time.Second - 1).Truncate(time.Second)
		for range 3 {
			err := apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "refused", apierror.WithRetryAfter(d))
			var got []time.Duration
			for _, det := range err.Details() {
				v, verr := det.Value()
				if verr != nil {
					t.Fatalf("%v: detail %s: %v", d, det.Type(), verr)
				}
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					got = append(got, ri.GetRetryDelay().AsDuration())
					fresh, merr := proto.Marshal(ri)
					if merr != nil || !bytes.Equal(det.Bytes(), fresh) {
						t.Errorf("%v: the RetryInfo's bytes are not the message's own", d)
					}
				}
			}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("%v: RetryInfo delays %v, want [%v]", d, got, want)
			}
			if ra := err.Meta().Get("Retry-After"); ra != strconv.FormatInt(int64(want/time.Second), 10) {
				t.Fatalf("%v: Retry-After %q, want %v", d, ra, want)
			}
		}
	}
}

// wantReason asserts that rec's body is the specification's JSON error,
// invalid_argument with one ErrorInfo of reason in the edge's domain, as
// a Connect client decodes it.
func wantReason(t *testing.T, rec *httptest.ResponseRecorder, reason string) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var wire struct {
		Code    string `json:"code"`
		Details []struct {
			Type   string `json:"type"`
			Value  string `json:"value"`
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"details"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &wire); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if wire.Code != "invalid_argument" || len(wire.Details) != 1 || wire.Details[0].Type != "google.rpc.ErrorInfo" ||
		wire.Details[0].Value == "" || wire.Details[0].Reason != reason || wire.Details[0].Domain != apierror.Domain {
		t.Errorf("body %s, want invalid_argument with one ErrorInfo, reason %s", rec.Body, reason)
	}
}
