package apierror_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/orgedge/edge/edge/apierror"
)

// connectBody returns the JSON body connect-go itself writes for err to a
// Connect unary caller, as the backend does.
func connectBody(t testing.TB, err *connect.Error) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if werr := connect.NewErrorWriter().Write(rec, req, err); werr != nil {
		t.Fatal(werr)
	}
	return rec.Body.Bytes()
}

// withDetails returns a connect error as the backend builds them.
func withDetails(t testing.TB, code connect.Code, msg string, details ...proto.Message) *connect.Error {
	t.Helper()
	err := connect.NewError(code, errors.New(msg))
	for _, m := range details {
		d, derr := connect.NewErrorDetail(m)
		if derr != nil {
			t.Fatal(derr)
		}
		err.AddDetail(d)
	}
	return err
}

func backendError(t testing.TB) *connect.Error {
	return withDetails(t, connect.CodeInvalidArgument, "invalid request: name: must be a DNS label",
		&errdetails.ErrorInfo{Reason: "VALIDATION_FAILED", Domain: "svc.v1.OrganizationService",
			Metadata: map[string]string{"field_count": "1"}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "name", Description: "must be a DNS label"},
		}},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{
			{Subject: "org:org_1", Description: "2 concurrent environments"},
		}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)},
	)
}

// decodeLikeClient decodes an error body as connect-go's client does: code,
// message, and details of type and base64 value.
func decodeLikeClient(body []byte) (*connect.Error, error) {
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []*struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, err
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(wire.Code)); err != nil {
		return nil, err
	}
	ce := connect.NewWireError(code, errors.New(wire.Message))
	for _, d := range wire.Details {
		if d == nil {
			return nil, errors.New("null detail")
		}
		bin, err := connect.DecodeBinaryHeader(d.Value)
		if err != nil {
			return nil, err
		}
		url := d.Type
		if !strings.Contains(url, "/") {
			url = "type.googleapis.com/" + url
		}
		detail, err := connect.NewErrorDetail(&anypb.Any{TypeUrl: url, Value: bin})
		if err != nil {
			return nil, err
		}
		ce.AddDetail(detail)
	}
	return ce, nil
}

// sameError says how a and b differ in code, message or details (type and
// bytes), or returns "".
func sameError(a, b *connect.Error) string {
	if a.Code() != b.Code() || a.Message() != b.Message() {
		return fmt.Sprintf("%v %q, then %v %q", a.Code(), a.Message(), b.Code(), b.Message())
	}
	da, db := a.Details(), b.Details()
	if len(da) != len(db) {
		return fmt.Sprintf("%d details, then %d", len(da), len(db))
	}
	for i := range da {
		if da[i].Type() != db[i].Type() || !bytes.Equal(da[i].Bytes(), db[i].Bytes()) {
			return fmt.Sprintf("detail %d: %s %x, then %s %x", i, da[i].Type(), da[i].Bytes(), db[i].Type(), db[i].Bytes())
		}
	}
	return ""
}

func TestRewrittenBackendErrorHasSpecShapeAndStillDecodesInConnectClients(t *testing.T) {
	original := backendError(t)
	body := connectBody(t, original)
	if !bytes.Contains(body, []byte(`"debug"`)) {
		t.Fatalf("connect-go no longer writes debug: %s", body)
	}
	out, ok := apierror.RewriteJSON(body)
	if !ok {
		t.Fatalf("RewriteJSON(%s) not ok", body)
	}

	var shaped struct {
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Details []map[string]any `json:"details"`
	}
	if err := json.Unmarshal(out, &shaped); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if shaped.Code != "invalid_argument" || shaped.Message != original.Message() {
		t.Errorf("code %q message %q", shaped.Code, shaped.Message)
	}
	want := []map[string]any{
		{"type": "google.rpc.ErrorInfo", "@type": "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": "VALIDATION_FAILED", "domain": "svc.v1.OrganizationService",
			"metadata": map[string]any{"field_count": "1"}},
		{"type": "google.rpc.BadRequest", "@type": "type.googleapis.com/google.rpc.BadRequest",
			"fieldViolations": []any{map[string]any{"field": "name", "description": "must be a DNS label"}}},
		{"type": "google.rpc.QuotaFailure", "@type": "type.googleapis.com/google.rpc.QuotaFailure",
			"violations": []any{map[string]any{"subject": "org:org_1", "description": "2 concurrent environments"}}},
		{"type": "google.rpc.RetryInfo", "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"},
	}
	if len(shaped.Details) != len(want) {
		t.Fatalf("%d details, want %d", len(shaped.Details), len(want))
	}
	for i, d := range shaped.Details {
		if _, ok := d["value"].(string); !ok {
			t.Errorf("details[%d] has no value", i)
		}
		delete(d, "value")
		got, _ := json.Marshal(d)
		wantJSON, _ := json.Marshal(want[i])
		if !bytes.Equal(got, wantJSON) {
			t.Errorf("details[%d] (without value)\n%s\nwant\n%s", i, got, wantJSON)
		}
	}

	// A real Connect client reading the rewritten body sees the original.
	srv, httpClient, _ := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
	}))
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](httpClient, srv.URL+procedure, connect.WithProtoJSON())
	_, err := client.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{}))
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v", err)
	}
	if diff := sameError(original, ce); diff != "" {
		t.Errorf("client decodes %s", diff)
	}
	for i, d := range ce.Details() {
		v, verr := d.Value()
		if verr != nil {
			t.Fatalf("detail %d: %v", i, verr)
		}
		wantValue, _ := original.Details()[i].Value()
		if !proto.Equal(v, wantValue) {
			t.Errorf("detail %d is %v, want %v", i, v, wantValue)
		}
	}

	if again, ok := apierror.RewriteJSON(out); !ok || !bytes.Equal(again, out) {
		t.Errorf("rewriting again gives %s, %v; want the same body", again, ok)
	}
}

func TestRewriteJSONKeepsUnknownDetailsAsTheyAre(t *testing.T) {
	unknown := `{"type":"acme.v1.Secret","value":"CgNmb28","debug":{"name":"foo"}}`
	body := `{"code":"internal","message":"boom","details":[` + unknown +
		`,{"type":"google.rpc.RetryInfo","value":"CgIIAw==","debug":{"retryDelay":"3s"}}],"extra":{"kept":true}}`
	out, ok := apierror.RewriteJSON([]byte(body))
	if !ok {
		t.Fatal("not ok")
	}
	want := `{"code":"internal","message":"boom","details":[` + unknown +
		`,{"type":"google.rpc.RetryInfo","value":"CgIIAw==","@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}],"extra":{"kept":true}}`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestRewriteJSONLeavesAloneWhatItCannotShape(t *testing.T) {
	stringValue := string(connectBody(t, withDetails(t, connect.CodeInternal, "boom", wrapperspb.String("hi"))))
	shaped, _ := apierror.RewriteJSON(connectBody(t, backendError(t)))
	cases := []struct {
		name, body string
		wantOK     bool
	}{
		{"Garbage", "not json", false},
		{"Empty", "", false},
		{"Array", "[]", false},
		{"Null", "null", false},
		{"NoCode", `{"message":"boom"}`, false},
		{"UnknownCode", `{"code":"teapot"}`, false},
		{"NumericCode", `{"code":8}`, false},
		{"TrailingData", `{"code":"internal"} {}`, false},
		{"DuplicateKey", `{"code":"internal","code":"not_found"}`, false},
		{"KeysEqualButForCase", `{"code":"internal","Code":"not_found","details":[]}`, false},
		{"BadBase64", `{"code":"internal","details":[{"type":"google.rpc.ErrorInfo","value":"!!"}]}`, false},
		{"NullDetail", `{"code":"internal","details":[null]}`, false},
		{"DetailsNotArray", `{"code":"internal","details":{}}`, false},
		{"TooLarge", `{"code":"internal","message":"` + strings.Repeat("x", apierror.MaxRewriteSize) + `"}`, false},
		{"NoDetails", `{"code":"internal","message":"boom"}`, true},
		{"EmptyDetails", `{"code":"internal","details":[]}`, true},
		{"NullDetails", `{"code":"internal","details":null}`, true},
		{"AlreadyShaped", string(shaped), true},
		{"AnyFormWouldRepeatValue", stringValue, true},
		{"DetailKeysEqualButForCase", `{"code":"internal","details":[{"type":"google.rpc.ErrorInfo","Type":"x","value":""}]}`, true},
		{"DetailNotAnObject", `{"code":"internal","details":["x"]}`, false},
		{"UndecodableValue", `{"code":"internal","details":[{"type":"google.rpc.ErrorInfo","value":"/////w"}]}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ok := apierror.RewriteJSON([]byte(c.body))
			if ok != c.wantOK {
				t.Errorf("ok = %v, want %v", ok, c.wantOK)
			}
			if string(out) != c.body {
				t.Errorf("body changed to %s", out)
			}
		})
	}
}

func TestWriteAndRewriteAgreeOnTheBody(t *testing.T) {
	err := apierror.New(connect.CodeResourceExhausted, "RATE_LIMIT_EXCEEDED", "slow down",
		apierror.WithRetryAfter(1500*time.Millisecond),
		apierror.WithMetadata("limit", "requests_per_minute"),
		apierror.WithDetail(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "plan:free"}}}))
	rewritten, ok := apierror.RewriteJSON(connectBody(t, err))
	if !ok {
		t.Fatal("not ok")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, procedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	apierror.Write(rec, req, err)
	if got := rec.Body.String(); got != string(rewritten) {
		t.Errorf("Write writes\n%s\nRewriteJSON gives\n%s", got, rewritten)
	}
	if rec.Header().Get("Retry-After") != "2" || !strings.Contains(rec.Body.String(), `"retryDelay":"2s"`) {
		t.Errorf("1.5s is not rounded up to 2s in both places: %v %s", rec.Header(), rec.Body)
	}
}

func TestNewCarriesExactlyOneErrorInfo(t *testing.T) {
	err := apierror.New(connect.CodePermissionDenied, "MISSING_ROLE", "needs svc-admin",
		apierror.WithMetadata("required_roles", "svc-admin"),
		apierror.WithDetail(&errdetails.ErrorInfo{Reason: "OTHER"}),
		apierror.WithDetail(nil),
		apierror.WithHeader("X-A", "1"), apierror.WithHeader("X-A", "2"))
	if err.Code() != connect.CodePermissionDenied || err.Message() != "needs svc-admin" {
		t.Errorf("code %v message %q", err.Code(), err.Message())
	}
	if len(err.Details()) != 1 {
		t.Fatalf("%d details, want 1", len(err.Details()))
	}
	v, _ := err.Details()[0].Value()
	want := &errdetails.ErrorInfo{Reason: "MISSING_ROLE", Domain: "edge", Metadata: map[string]string{"required_roles": "svc-admin"}}
	if !proto.Equal(v, want) {
		t.Errorf("detail %v, want %v", v, want)
	}
	if got := err.Meta().Values("X-A"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("X-A %v", got)
	}
}

func TestRetryAfterIsWholeSecondsRoundedUp(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Millisecond, "1"},
		{time.Second, "1"},
		{1001 * time.Millisecond, "2"},
		{12 * time.Second, "12"},
	}
	for _, c := range cases {
		t.Run(c.d.String(), func(t *testing.T) {
			err := apierror.New(connect.CodeResourceExhausted, "R", "m", apierror.WithRetryAfter(c.d))
			if got := err.Meta().Get("Retry-After"); got != c.want {
				t.Errorf("Retry-After %q, want %s", got, c.want)
			}
			v, _ := err.Details()[1].Value()
			if got := v.(*errdetails.RetryInfo).GetRetryDelay().AsDuration().String(); got != c.want+"s" {
				t.Errorf("retry delay %s, want %ss", got, c.want)
			}
		})
	}
}
