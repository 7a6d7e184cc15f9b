package apierror

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// marshalErrorBefore is marshalError as it was before the detail cache
// (main at 522d3f2), kept to hold the new encoder to its bytes.
func marshalErrorBefore(err *connect.Error) []byte {
	body := object{
		{"code", quote(err.Code().String())},
		{"message", quote(err.Message())},
	}
	if ds := err.Details(); len(ds) > 0 {
		details := make([][]byte, len(ds))
		for i, d := range ds {
			value := d.Bytes()
			detail := object{
				{"type", quote(d.Type())},
				{"value", quote(base64.RawStdEncoding.EncodeToString(value))},
			}
			if flat, ok := withAny(detail, d.Type(), value); ok {
				detail = flat
			}
			details[i] = detail.marshal()
		}
		body = append(body, member{"details", marshalArray(details)})
	}
	return body.marshal()
}

// TestJSONBodyIsByteForByteTheEncoderBeforeTheCache writes many errors,
// each several times (from the cache then), some past the cache's bound,
// and compares every body with the encoder before the cache.
func TestJSONBodyIsByteForByteTheEncoderBeforeTheCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 22))
	texts := []string{"", "free", "pro", "plan", "a<b>&c", "é ü 日本 🙂", "\"quoted\"\n\t\\", "\u2028\u2029", "\x7f\x01",
		"requests_per_minute", "op:svc.v1.OrganizationService/CreateProject", string([]byte{0xff, 0xfe})}
	pick := func() string { return texts[rng.IntN(len(texts))] }
	codes := []connect.Code{connect.CodeResourceExhausted, connect.CodeUnauthenticated, connect.CodePermissionDenied,
		connect.CodeInvalidArgument, connect.CodeUnavailable, connect.CodeInternal}
	var errs []*connect.Error
	for i := range 3000 {
		var opts []Option
		for range rng.IntN(4) {
			opts = append(opts, WithMetadata(pick(), pick()))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, WithRetryAfter(time.Duration(rng.Int64N(int64(48*time.Hour)))))
		}
		switch rng.IntN(6) {
		case 0:
			opts = append(opts, WithDetail(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: pick(), Description: pick()}}}))
		case 1:
			opts = append(opts, WithDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: pick(), Description: pick()}}}))
		case 2:
			opts = append(opts, WithDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(rng.Int64N(int64(time.Hour))))}))
		case 3:
			// Its Any form repeats "value": the detail stays as Connect wrote it.
			opts = append(opts, WithDetail(wrapperspb.String(pick())))
		case 4:
			opts = append(opts, WithDetail(&emptypb.Empty{}))
		}
		// A value past maxCachedValue is encoded each time.
		if i%100 == 0 {
			opts = append(opts, WithMetadata("long", string(bytes.Repeat([]byte("x"), maxCachedValue))))
		}
		errs = append(errs, New(codes[rng.IntN(len(codes))], pick(), fmt.Sprintf("%s %d", pick(), i), opts...))
	}
	errs = append(errs, connect.NewError(connect.CodeNotFound, errors.New("no details")), connect.NewWireError(connect.CodeUnknown, errors.New("wire")))
	for round := range 3 {
		for _, e := range errs {
			if got, want := marshalError(e), marshalErrorBefore(e); !bytes.Equal(got, want) {
				t.Fatalf("round %d: body\n%s\nthe encoder before the cache wrote\n%s", round, got, want)
			}
		}
	}
	detailCache.mu.RLock()
	n := detailCache.n
	detailCache.mu.RUnlock()
	if n > maxCachedDetails {
		t.Errorf("%d details cached, bound %d", n, maxCachedDetails)
	}
}
