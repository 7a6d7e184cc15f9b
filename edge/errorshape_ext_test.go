package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// curlAnswer is what curl shows a user: the status, the headers, the body.
type curlAnswer struct {
	status int
	header http.Header
	body   []byte
}

// curl runs the curl command with args (the URL among them), as a user
// would, and returns its answer.
func curl(t *testing.T, args ...string) curlAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// -D - writes the status line and headers before the body.
	out, err := exec.CommandContext(ctx, "curl", append([]string{"-sS", "-D", "-", "--max-time", "50"}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	head, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
	lines := strings.Split(string(head), "\r\n")
	var a curlAnswer
	if f := strings.Fields(lines[0]); len(f) >= 2 {
		a.status, _ = strconv.Atoi(f[1])
	}
	a.header = http.Header{}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			a.header.Add(k, strings.TrimSpace(v))
		}
	}
	a.body = body
	return a
}

// wantSpecError asserts that a is the specification's JSON error: the
// status, Content-Type application/json, a code, a message that names no
// Go type or package, and exactly one detail, a google.rpc.ErrorInfo with
// the reason and domain.
func wantSpecError(t *testing.T, what string, a curlAnswer, status int, code, reason, domain string) {
	t.Helper()
	var body struct {
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Details []map[string]any `json:"details"`
	}
	if a.status != status {
		t.Errorf("%s: HTTP %d %s, want %d", what, a.status, a.body, status)
		return
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json (body %q)", what, ct, a.body)
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, a.body, err)
		return
	}
	if body.Code != code || body.Message == "" {
		t.Errorf("%s: code %q message %q, want code %q and a message", what, body.Code, body.Message, code)
	}
	for _, name := range []string{"*", "svcv1", "github.com", "unmarshal into", ".go"} {
		if strings.Contains(body.Message, name) {
			t.Errorf("%s: message %q names the implementation (%q)", what, body.Message, name)
		}
	}
	if len(body.Details) != 1 {
		t.Errorf("%s: details %v, want exactly one ErrorInfo", what, body.Details)
		return
	}
	d := body.Details[0]
	want := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "type": "google.rpc.ErrorInfo",
		"reason": reason, "domain": domain}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("%s: detail %s = %v, want %v (body %s)", what, k, d[k], v, a.body)
		}
	}
}

// TestGetUsageWithNoBodyIsTheEmptyRequest: the specification's GetUsage
// takes "no body". curl and HTTPie users sending none, with or without a
// Content-Type, get their usage as with {}; a body without a Content-Type
// is still refused (415, in the specification's shape), and so is a call
// without a token sent with no Content-Type: 401, not 415.
func TestGetUsageWithNoBodyIsTheEmptyRequest(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	url := s.edge.URL + getUsage
	auth := "Authorization: Bearer " + token("pro-usage-nobody")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"{}", []string{"-H", "Content-Type: application/json", "-d", "{}"}},
		{"application/json, empty body", []string{"-H", "Content-Type: application/json", "-d", ""}},
		// As HTTPie's `http POST URL` sends it: Content-Length 0.
		{"no Content-Type, Content-Length 0", []string{"-X", "POST", "-H", "Content-Length: 0"}},
		{"no Content-Type, no body", []string{"-X", "POST"}},
		{"no Content-Type, no body, HTTP/2", []string{"-X", "POST", "--http2-prior-knowledge"}},
	} {
		a := curl(t, append(c.args, "-H", auth, url)...)
		var usage struct {
			APIUsage *struct {
				Limits *struct {
					RequestsPerMinute int `json:"requestsPerMinute"`
				} `json:"limits"`
			} `json:"apiUsage"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &usage) != nil || usage.APIUsage == nil || usage.APIUsage.Limits.RequestsPerMinute == 0 {
			t.Errorf("%s: HTTP %d %s, want 200 and the usage", c.name, a.status, a.body)
		}
	}
	a := curl(t, "-H", "Content-Type:", "-d", "{}", "-H", auth, url)
	wantSpecError(t, "a body without Content-Type", a, http.StatusUnsupportedMediaType, "invalid_argument", "UNSUPPORTED_MEDIA_TYPE", "edge")
	if a.header.Get("Accept-Post") == "" {
		t.Errorf("415 without Accept-Post")
	}
	a = curl(t, "-X", "POST", url)
	wantSpecError(t, "no token, no Content-Type, no body", a, http.StatusUnauthorized, "unauthenticated", "TOKEN_MISSING", "edge")
}

// TestEveryErrorToAJSONCallerHasOneErrorInfoAndNoGoNames: a body that is
// not the request's JSON, a Content-Type the API does not serve, a method
// other than POST: each answer is the specification's error, with one
// ErrorInfo, and says nothing of the implementation. Before, the first had
// connect-go's message ("unmarshal message: unmarshal into
// *svcv1.ListOrganizationsRequest: ...") and no details; 415 and 405 had
// no body at all.
func TestEveryErrorToAJSONCallerHasOneErrorInfoAndNoGoNames(t *testing.T) {
	t.Parallel()
	s, token := startStack(t, orgsvc.Config{}, nil)
	auth := "Authorization: Bearer " + token("pro-badjson")
	list := s.edge.URL + "/svc.v1.OrganizationService/ListOrganizations"
	json := "Content-Type: application/json"
	for _, c := range []struct {
		name, url, body string
		header          []string
	}{
		{"cut short, backend", list, `{"pageSize":`, []string{json}},
		{"a string for a number, backend", list, `{"pageSize":"abc"}`, []string{json}},
		{"empty, backend", list, ``, []string{json}},
		{"not JSON, Connect, backend", list, `pageSize`, []string{json, "Connect-Protocol-Version: 1"}},
		{"cut short, the edge's GetUsage", s.edge.URL + getUsage, `{"x":`, []string{json}},
	} {
		args := []string{"-d", c.body, "-H", auth}
		for _, h := range c.header {
			args = append(args, "-H", h)
		}
		wantSpecError(t, c.name, curl(t, append(args, c.url)...), http.StatusBadRequest, "invalid_argument", "INVALID_JSON", "edge")
	}

	a := curl(t, "-H", "Content-Type: text/plain", "-d", "{}", "-H", auth, list)
	wantSpecError(t, "text/plain", a, http.StatusUnsupportedMediaType, "invalid_argument", "UNSUPPORTED_MEDIA_TYPE", "edge")
	if a.header.Get("Accept-Post") == "" {
		t.Errorf("415 without Accept-Post")
	}
	a = curl(t, "-X", "PUT", "-H", json, "-d", "{}", "-H", auth, list)
	wantSpecError(t, "PUT", a, http.StatusMethodNotAllowed, "invalid_argument", "METHOD_NOT_ALLOWED", "edge")
	if a.header.Get("Allow") != "GET, POST" {
		t.Errorf("405 with Allow %q", a.header.Get("Allow"))
	}

	// A Connect client still decodes the error, and finds the ErrorInfo.
	c := testkit.NewClients(s.edge.URL, testkit.ConnectJSON, token("pro-badjson"))
	_, err := c.Org.ListOrganizations(ctxT(t), req(&svcv1.ListOrganizationsRequest{PageSize: 5}))
	if err != nil {
		t.Fatalf("a valid call: %v", err)
	}
	m := testkit.Scrape(t, s.edge.AdminURL+"/metrics")
	if n := m.Sum("edge_requests_total", "method", "ListOrganizations", "code", "invalid_argument"); n != 4 {
		t.Errorf("edge_requests_total{method=ListOrganizations,code=invalid_argument} %v, want 4", n)
	}
}
