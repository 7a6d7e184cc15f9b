package testkit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Outcome is what a raw call's answer says, in whichever protocol it came:
// the code name ("ok", "deadline_exceeded", …) and the reason of its
// ErrorInfo, if any.
type Outcome struct {
	Code   string
	Reason string
	Status int // the HTTP status
}

func (o Outcome) String() string { return fmt.Sprintf("%s %s (HTTP %d)", o.Code, o.Reason, o.Status) }

// Envelope frames one message as Connect streaming, gRPC and gRPC-Web do.
func Envelope(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

var grpcCodes = []string{"ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
	"permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented",
	"internal", "unavailable", "data_loss", "unauthenticated"}

// ReadOutcome reads res whole and decodes its outcome: gRPC and gRPC-Web
// (status in headers, trailers or the trailer frame), Connect streaming
// (the end-of-stream message), Connect unary and JSON (the status and the
// JSON error body).
func ReadOutcome(res *http.Response) (Outcome, error) {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	_ = res.Body.Close()
	o := Outcome{Status: res.StatusCode}
	ct := res.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		h := res.Header
		if h.Get("Grpc-Status") == "" {
			h = res.Trailer
		}
		if strings.HasPrefix(ct, "application/grpc-web") && h.Get("Grpc-Status") == "" {
			h = webTrailer(body)
		}
		n, aerr := strconv.Atoi(h.Get("Grpc-Status"))
		if aerr != nil || n < 0 || n >= len(grpcCodes) {
			return o, fmt.Errorf("no grpc-status (read: %v)", err)
		}
		o.Code = grpcCodes[n]
		if raw, derr := base64.RawStdEncoding.DecodeString(strings.TrimRight(h.Get("Grpc-Status-Details-Bin"), "=")); derr == nil {
			var st status.Status
			if proto.Unmarshal(raw, &st) == nil {
				o.Reason = reasonOf(st.Details)
			}
		}
		return o, nil
	case strings.HasPrefix(ct, "application/connect+"):
		for len(body) >= 5 {
			n := binary.BigEndian.Uint32(body[1:5])
			if uint32(len(body)-5) < n {
				break
			}
			if body[0]&0x02 != 0 {
				var end struct {
					Error *wireError `json:"error"`
				}
				if json.Unmarshal(body[5:5+n], &end) != nil {
					return o, fmt.Errorf("bad end-of-stream message %q", body[5:5+n])
				}
				if end.Error == nil {
					o.Code = "ok"
					return o, nil
				}
				o.Code, o.Reason = end.Error.Code, wireReason(end.Error)
				return o, nil
			}
			body = body[5+n:]
		}
		return o, fmt.Errorf("no end-of-stream message (read: %v)", err)
	}
	if res.StatusCode == http.StatusOK {
		o.Code = "ok"
		return o, nil
	}
	var w wireError
	if json.Unmarshal(body, &w) != nil || w.Code == "" {
		return o, fmt.Errorf("HTTP %d with a body that is no error: %q", res.StatusCode, truncate(body))
	}
	o.Code, o.Reason = w.Code, wireReason(&w)
	return o, nil
}

func wireReason(w *wireError) string {
	var anys []*anypb.Any
	for _, d := range w.Details {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err == nil {
			anys = append(anys, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: raw})
		}
	}
	return reasonOf(anys)
}

// Reason is the reason of the ErrorInfo that a connect-go client's error
// carries, "" when err is no *connect.Error or has none.
func Reason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, _ := d.Value(); v != nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ei.Reason
			}
		}
	}
	return ""
}

func reasonOf(details []*anypb.Any) string {
	for _, a := range details {
		var ei errdetails.ErrorInfo
		if a.MessageIs(&ei) && a.UnmarshalTo(&ei) == nil {
			return ei.Reason
		}
	}
	return ""
}

// webTrailer finds gRPC-Web's trailer frame in a binary body.
func webTrailer(body []byte) http.Header {
	h := http.Header{}
	for len(body) >= 5 {
		n := binary.BigEndian.Uint32(body[1:5])
		if uint32(len(body)-5) < n {
			break
		}
		if body[0]&0x80 != 0 {
			for _, line := range bytes.Split(body[5:5+n], []byte("\r\n")) {
				if k, v, ok := strings.Cut(string(line), ":"); ok {
					h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
				}
			}
		}
		body = body[5+n:]
	}
	return h
}

// Sending is how RawCall sends a body.
type Sending int

const (
	// Sized: with its Content-Length.
	Sized Sending = iota
	// Unsized: without one (chunked over HTTP/1.1; no content-length over
	// HTTP/2), all at once.
	Unsized
	// Stalled: without one, and then nothing more, neither the rest nor
	// the body's end, until the answer has come (a slow or stuck client).
	Stalled
)

// RawCall posts body to url with the Content-Type ct and header, through
// hc, and reads the outcome.
func RawCall(ctx context.Context, hc *http.Client, url, ct string, header http.Header, body []byte, how Sending) (Outcome, error) {
	var r io.Reader = bytes.NewReader(body)
	switch how {
	case Unsized:
		r = io.MultiReader(r) // a reader whose length net/http cannot tell
	case Stalled:
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() { _, _ = pw.Write(body) }()
		r = pr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
	if err != nil {
		return Outcome{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ct)
	res, err := hc.Do(req)
	if err != nil {
		return Outcome{}, err
	}
	return ReadOutcome(res)
}

// Do sends r with client and returns the answer with its body read whole
// (and closed), failing the test if either fails.
func Do(t testing.TB, client *http.Client, r *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}
