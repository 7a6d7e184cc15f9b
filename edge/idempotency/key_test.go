package idempotency

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		in   []string
		want string
		ok   bool
	}{
		{[]string{"abc"}, "abc", true},
		{[]string{`"abc"`}, "abc", true},
		{[]string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{[]string{`"a\"b\\c"`}, `a"b\c`, true},
		{[]string{"a b"}, "a b", true},
		{[]string{strings.Repeat("~", 255)}, strings.Repeat("~", 255), true},
		{[]string{`"` + strings.Repeat("k", 255) + `"`}, strings.Repeat("k", 255), true},
		{nil, "", false},
		{[]string{"a", "b"}, "", false},
		{[]string{""}, "", false},
		{[]string{`""`}, "", false},
		{[]string{strings.Repeat("k", 256)}, "", false},
		{[]string{`"` + strings.Repeat("k", 256) + `"`}, "", false},
		{[]string{"tab\there"}, "", false},
		{[]string{"nul\x00"}, "", false},
		{[]string{"del\x7f"}, "", false},
		{[]string{"schlüssel"}, "", false},
		{[]string{`"open`}, "", false},
		{[]string{`"`}, "", false},
		{[]string{`"a"b"`}, "", false},
		{[]string{`"a\x"`}, "", false},
		{[]string{`"a\"`}, "", false},
		{[]string{`"é"`}, "", false},
	}
	for _, tt := range tests {
		got, ok := parseKey(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseKey(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEntryKeySharesASlotPerSubjectAndSeparatesTheRest(t *testing.T) {
	a := entryKey("user-1", "/svc.v1.S/M", "k")
	if !strings.HasPrefix(a, "idem:{") || strings.Count(a, "{") != 1 || strings.Count(a, "}") != 1 {
		t.Fatalf("entryKey = %q: want one hash tag", a)
	}
	tag := func(k string) string { return k[strings.Index(k, "{"):strings.Index(k, "}")] }
	if b := entryKey("user-1", "/svc.v1.S/N", "other"); tag(a) != tag(b) || a == b {
		t.Errorf("same subject: %q and %q", a, b)
	}
	if b := entryKey("{user-1}", "/svc.v1.S/M", "k"); tag(a) == tag(b) || strings.Count(b, "{") != 1 {
		t.Errorf("a subject with braces: %q", b)
	}
	// Moving bytes between parts must not name the same entry.
	if entryKey("a", "b\x00c", "d") == entryKey("a\x00b", "c", "d") {
		t.Error("parts are not delimited")
	}
}

func TestFingerprintCoversProcedureContentTypeQueryAndBody(t *testing.T) {
	base := fingerprint("/p", "application/json", "", []byte(`{"a":1}`))
	for name, fp := range map[string]string{
		"procedure":    fingerprint("/q", "application/json", "", []byte(`{"a":1}`)),
		"content type": fingerprint("/p", "application/proto", "", []byte(`{"a":1}`)),
		"query":        fingerprint("/p", "application/json", "x=1", []byte(`{"a":1}`)),
		"body":         fingerprint("/p", "application/json", "", []byte(`{"a": 1}`)),
	} {
		if fp == base {
			t.Errorf("another %s has the same fingerprint", name)
		}
	}
}

func TestContentType(t *testing.T) {
	post := func(ct string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/svc.v1.S/M", nil)
		r.Header.Set("Content-Type", ct)
		return r
	}
	tests := []struct {
		r    *http.Request
		want string
	}{
		{post("application/json"), "application/json"},
		{post("application/json; charset=utf-8"), "application/json"},
		{post("Application/GRPC+proto"), "application/grpc+proto"},
		{httptest.NewRequest(http.MethodGet, "/svc.v1.S/M?connect=v1&encoding=proto&message=x", nil), "GET encoding=proto"},
	}
	for _, tt := range tests {
		if got := contentType(tt.r); got != tt.want {
			t.Errorf("contentType(%s %v) = %q, want %q", tt.r.Method, tt.r.Header, got, tt.want)
		}
	}
}
