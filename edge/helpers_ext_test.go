package edge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/orgedge/edge/internal/testkit"
)

// jsonCall posts body to procedure as plain HTTP/JSON over HTTP/1.1, with
// token as a bearer token, and returns what a curl user would see: the
// answer (its body read and closed) and that body decoded as JSON (nil when
// it is none).
func jsonCall(t *testing.T, base, token, procedure, body string) (*http.Response, map[string]any) {
	t.Helper()
	return jsonCallWith(t, testkit.HTTP1Client, nil, base, token, procedure, body)
}

// jsonCallWith is jsonCall through the client c, sending header too.
func jsonCallWith(t *testing.T, c *http.Client, header http.Header, base, token, procedure, body string) (*http.Response, map[string]any) {
	t.Helper()
	r, err := http.NewRequest("POST", base+procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		r.Header[k] = vs
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", procedure, err)
	}
	_ = json.Unmarshal(b, &m)
	return res, m
}
