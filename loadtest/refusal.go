package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// Reasons of the edge's rate refusals (docs/limits.md).
var (
	planReasons      = []string{"RATE_LIMIT_EXCEEDED", "DAILY_LIMIT_EXCEEDED"}
	operationReasons = []string{"OPERATION_RATE_EXCEEDED"}
)

// RefusalRule says what a refusal must carry.
type RefusalRule struct {
	Reasons      []string // the ErrorInfo reason must be one of these
	Retry        bool     // Retry-After ≥ 1 and a RetryInfo of the same seconds
	RateHeaders  bool     // X-RateLimit-Limit, -Remaining, -Reset, RateLimit, RateLimit-Policy
	QuotaFailure bool     // a google.rpc.QuotaFailure detail
}

var rateRefusal = RefusalRule{Reasons: planReasons, Retry: true, RateHeaders: true}

// checkRefusal returns what is wrong with a refusal as its protocol carried
// it, nothing when it is well formed:
//
//   - Connect unary and HTTP/JSON: HTTP 429, a JSON error body with code
//     resource_exhausted;
//   - gRPC and gRPC-Web: HTTP 200, grpc-status 8 (in the trailers, or in the
//     headers of a trailers-only answer; for gRPC-Web also in the body's
//     trailer frame), grpc-status-details-bin holding a google.rpc.Status of
//     code 8;
//
// then, in every protocol, exactly one google.rpc.ErrorInfo whose reason
// the rule allows, and what the rule asks for.
func checkRefusal(x *Exchange, rule RefusalRule) []string {
	if x == nil || x.Status == 0 {
		return []string{"no answer was recorded"}
	}
	var (
		problems []string
		details  []proto.Message
		meta     = x.Header.Clone() // where Retry-After may be: headers, or trailers too for gRPC
	)
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if meta == nil {
		meta = http.Header{}
	}
	if x.Protocol.unaryErrorsInHTTPStatus() {
		if x.Status != http.StatusTooManyRequests {
			bad("HTTP status %d, want 429", x.Status)
		}
		code, _, ds, err := parseJSONError(x.Body)
		switch {
		case err != nil:
			bad("error body: %v", err)
		case code != connect.CodeResourceExhausted:
			bad("code %s, want resource_exhausted", code)
		}
		details = ds
	} else {
		if x.Status != http.StatusOK {
			bad("HTTP status %d, want 200 with grpc-status 8", x.Status)
		}
		status := x.Header.Clone()
		for k, vs := range x.Trailer {
			status[k] = append(status[k], vs...)
			meta[k] = append(meta[k], vs...)
		}
		if x.Protocol == GRPCWeb {
			if t, err := grpcWebTrailer(x.Body); err != nil {
				bad("gRPC-Web trailer frame: %v", err)
			} else {
				for k, vs := range t {
					status[k] = append(status[k], vs...)
					meta[k] = append(meta[k], vs...)
				}
			}
		}
		if got := status.Get("Grpc-Status"); got != "8" {
			bad("grpc-status %q, want 8 (RESOURCE_EXHAUSTED)", got)
		}
		raw := status.Get("Grpc-Status-Details-Bin")
		if raw == "" {
			bad("no grpc-status-details-bin")
		} else if st, ds, err := decodeStatusDetails(raw); err != nil {
			bad("grpc-status-details-bin: %v", err)
		} else {
			if st.Code != 8 {
				bad("grpc-status-details-bin code %d, want 8", st.Code)
			}
			details = ds
		}
	}

	var infos []*errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range details {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			infos = append(infos, v)
		case *errdetails.RetryInfo:
			retry = v
		case *errdetails.QuotaFailure:
			quota = v
		}
	}
	switch {
	case len(infos) != 1:
		bad("%d ErrorInfo details, want exactly 1", len(infos))
	case !slices.Contains(rule.Reasons, infos[0].Reason):
		bad("ErrorInfo reason %q, want %s", infos[0].Reason, strings.Join(rule.Reasons, " or "))
	}
	if rule.Retry {
		after, err := strconv.Atoi(meta.Get("Retry-After"))
		switch {
		case meta.Get("Retry-After") == "":
			bad("no Retry-After")
		case err != nil || after < 1:
			bad("Retry-After %q, want whole seconds ≥ 1", meta.Get("Retry-After"))
		}
		switch {
		case retry == nil:
			bad("no RetryInfo detail")
		case retry.RetryDelay.AsDuration() < time.Second:
			bad("RetryInfo delay %v, want ≥ 1s", retry.RetryDelay.AsDuration())
		case err == nil && retry.RetryDelay.AsDuration() != time.Duration(after)*time.Second:
			bad("RetryInfo delay %v differs from Retry-After %ds", retry.RetryDelay.AsDuration(), after)
		}
	}
	if rule.QuotaFailure && (quota == nil || len(quota.Violations) == 0) {
		bad("no QuotaFailure detail with a violation")
	}
	if rule.RateHeaders {
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if v := x.Header.Get(h); v == "" {
				bad("no %s header", h)
			} else if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				bad("%s %q, want a whole number", h, v)
			}
		}
		if rl := x.Header.Get("RateLimit"); !strings.Contains(rl, ";r=") || !strings.Contains(rl, ";t=") {
			bad("RateLimit header %q, want \"name\";r=…;t=…", rl)
		}
		if x.Header.Get("RateLimit-Policy") == "" {
			bad("no RateLimit-Policy header")
		}
	}
	return problems
}

// parseJSONError reads the API's JSON error body: Connect's code, message
// and details (type and base64 value), or the specification's "@type" form
// of each detail.
func parseJSONError(data []byte) (connect.Code, string, []proto.Message, error) {
	var body struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Details []json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return 0, "", nil, fmt.Errorf("not JSON: %q", truncate(data, 120))
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(body.Code)); err != nil || body.Code == "" {
		return 0, "", nil, fmt.Errorf("no valid code in %q", truncate(data, 120))
	}
	var out []proto.Message
	for i, raw := range body.Details {
		m, err := jsonDetail(raw)
		if err != nil {
			return code, body.Message, out, fmt.Errorf("detail %d: %w", i, err)
		}
		out = append(out, m)
	}
	return code, body.Message, out, nil
}

func jsonDetail(raw json.RawMessage) (proto.Message, error) {
	var d struct {
		Type   string `json:"type"`
		Value  string `json:"value"`
		AtType string `json:"@type"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	if d.Type != "" && d.Value != "" {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			return nil, fmt.Errorf("value is not base64: %w", err)
		}
		return unmarshalNamed(protoreflect.FullName(d.Type), b)
	}
	if d.AtType != "" {
		// The specification's form: the message's JSON fields beside @type.
		a := new(anypb.Any)
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(withoutConnectFields(raw), a); err != nil {
			return nil, err
		}
		return a.UnmarshalNew()
	}
	return nil, errors.New("neither type and value nor @type")
}

// withoutConnectFields drops "type" and "value", which protojson would read
// as fields of the detail.
func withoutConnectFields(raw json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "type")
	delete(m, "value")
	b, _ := json.Marshal(m)
	return b
}

func unmarshalNamed(name protoreflect.FullName, b []byte) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		return nil, fmt.Errorf("detail type %s: %w", name, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("detail %s: %w", name, err)
	}
	return m, nil
}

// decodeStatusDetails reads grpc-status-details-bin.
func decodeStatusDetails(raw string) (*statuspb.Status, []proto.Message, error) {
	b, err := connect.DecodeBinaryHeader(raw)
	if err != nil {
		return nil, nil, err
	}
	st := new(statuspb.Status)
	if err := proto.Unmarshal(b, st); err != nil {
		return nil, nil, err
	}
	var out []proto.Message
	for _, a := range st.Details {
		m, err := a.UnmarshalNew()
		if err != nil {
			return st, out, fmt.Errorf("detail %s: %w", a.TypeUrl, err)
		}
		out = append(out, m)
	}
	return st, out, nil
}

// grpcWebTrailer reads the trailer frame (flag 0x80) of a gRPC-Web body;
// an empty body (a trailers-only answer) has none.
func grpcWebTrailer(body []byte) (http.Header, error) {
	for len(body) > 0 {
		if len(body) < 5 {
			return nil, errors.New("truncated frame header")
		}
		flags, n := body[0], binary.BigEndian.Uint32(body[1:5])
		if uint32(len(body)-5) < n {
			return nil, errors.New("truncated frame")
		}
		frame := body[5 : 5+n]
		body = body[5+n:]
		if flags&0x80 == 0 {
			continue
		}
		r := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(bytes.Clone(frame), "\r\n"...))))
		h, err := r.ReadMIMEHeader()
		if err != nil && len(h) == 0 {
			return nil, err
		}
		return http.Header(h), nil
	}
	return nil, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
