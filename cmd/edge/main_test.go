package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCheckConfigAcceptsTheExampleAndNamesABadField(t *testing.T) {
	var out bytes.Buffer
	// The example names no Redis: a deployment must (or name a local one).
	t.Setenv("EDGE_REDIS_ADDR", "")
	if err := run(context.Background(), []string{"-check-config", "../../config/edge.yaml"}, &out); err == nil || !strings.Contains(err.Error(), "redis: set addr") {
		t.Fatalf("the shipped example without a Redis: %v, want redis refused", err)
	}
	t.Setenv("EDGE_REDIS_ADDR", "redis.internal:6379")
	if err := run(context.Background(), []string{"-check-config", "../../config/edge.yaml"}, &out); err != nil {
		t.Fatalf("the shipped example: %v", err)
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("output %q", out.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("upstream:\n  url: ftp://backend\noidc:\n  issuer_url: http://127.0.0.1:8081/realms/dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-check-config", bad}, &out)
	if err == nil || !strings.Contains(err.Error(), "upstream.url") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want an error naming upstream.url on line 2", err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the edge writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
