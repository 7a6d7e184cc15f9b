package apierror_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/orgedge/edge/edge/apierror"
)

func FuzzRewriteJSON(f *testing.F) {
	seeds := []*connect.Error{
		backendError(f),
		withDetails(f, connect.CodeNotFound, "environment not found",
			&errdetails.ErrorInfo{Reason: "ENVIRONMENT_NOT_FOUND", Domain: "svc.v1.EnvironmentService"}),
		withDetails(f, connect.CodeResourceExhausted, "slow down",
			&errdetails.RetryInfo{RetryDelay: durationpb.New(12e9)},
			&errdetails.ErrorInfo{Reason: "RATE_LIMIT_EXCEEDED", Domain: "edge", Metadata: map[string]string{"a": "<&>"}}),
		withDetails(f, connect.CodeInternal, "wrapped", wrapperspb.String("hi"), wrapperspb.Int64(7)),
		withDetails(f, connect.CodeUnknown, "", &errdetails.DebugInfo{StackEntries: []string{"a\u2028b"}}),
		apierror.New(connect.CodeUnauthenticated, "TOKEN_EXPIRED", "token expired",
			apierror.WithHeader("WWW-Authenticate", `Bearer error="invalid_token"`)),
	}
	for _, err := range seeds {
		body := connectBody(f, err)
		f.Add(body)
		shaped, _ := apierror.RewriteJSON(body)
		f.Add(shaped)
	}
	for _, s := range []string{
		`{"code":"internal","details":[{"type":"acme.v1.Secret","value":"CgNmb28","debug":{"name":"foo"}}]}`,
		`{"code":"unavailable","details":[{"type":"google.rpc.RetryInfo","value":"CgIIAw=="}]}`,
		`{"code":"internal","details":[{"type":"google.rpc.ErrorInfo","Type":"x","value":""}]}`,
		`{"code":"internal","details":[{"type":"type.example.com/google.rpc.ErrorInfo","value":"CgFy"}]}`,
		`{"code":"internal","code":"not_found"}`,
		`{"code":"internal"} trailing`,
		`[1,2,3]`,
		`not json at all`,
		"",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		in := bytes.Clone(body)
		out, ok := apierror.RewriteJSON(body)
		if !bytes.Equal(body, in) {
			t.Fatal("RewriteJSON modified its input")
		}
		if !ok {
			if !bytes.Equal(out, body) {
				t.Fatalf("not ok, yet the body changed to %s", out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %s", out)
		}
		before, err := decodeLikeClient(body)
		if err != nil {
			t.Fatalf("ok for a body a Connect client cannot decode (%v): %s", err, body)
		}
		after, err := decodeLikeClient(out)
		if err != nil {
			t.Fatalf("a Connect client cannot decode the output (%v): %s", err, out)
		}
		if diff := sameError(before, after); diff != "" {
			t.Fatalf("round trip changed the error: %s\nin:  %s\nout: %s", diff, body, out)
		}
		checkAnyForms(t, body, out, after)
		if len(out) <= apierror.MaxRewriteSize {
			if again, ok := apierror.RewriteJSON(out); !ok || !bytes.Equal(again, out) {
				t.Fatalf("not idempotent: %s then %s", out, again)
			}
		}
	})
}

// checkAnyForms checks that every detail RewriteJSON gave an "@type"
// carries the protobuf JSON form of the very detail its type and value hold.
func checkAnyForms(t *testing.T, in, out []byte, decoded *connect.Error) {
	t.Helper()
	var before, after struct {
		Details []map[string]json.RawMessage `json:"details"`
	}
	if json.Unmarshal(in, &before) != nil || json.Unmarshal(out, &after) != nil ||
		len(before.Details) != len(after.Details) {
		return // details are odd, but the client check passed
	}
	for i, d := range after.Details {
		_, had := before.Details[i]["@type"]
		if _, shaped := d["@type"]; had || !shaped {
			continue
		}
		for key := range before.Details[i] {
			delete(d, key) // type, value and any other key it kept
		}
		anyJSON, _ := json.Marshal(d)
		var fromJSON anypb.Any
		if err := protojson.Unmarshal(anyJSON, &fromJSON); err != nil {
			t.Fatalf("details[%d] Any form %s does not decode: %v", i, anyJSON, err)
		}
		detail := decoded.Details()[i]
		if url := fromJSON.GetTypeUrl(); url[strings.LastIndexByte(url, '/')+1:] != detail.Type() {
			t.Fatalf("details[%d] has @type %s but type %s", i, url, detail.Type())
		}
		fromValue, err := protojson.Marshal(&anypb.Any{TypeUrl: fromJSON.GetTypeUrl(), Value: detail.Bytes()})
		if err != nil {
			t.Fatalf("details[%d]: %v", i, err)
		}
		reencoded, err := protojson.Marshal(&fromJSON)
		if err != nil {
			t.Fatalf("details[%d]: %v", i, err)
		}
		var a, b any
		_ = json.Unmarshal(fromValue, &a)
		_ = json.Unmarshal(reencoded, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("details[%d] Any form %s, value holds %s", i, reencoded, fromValue)
		}
	}
}
