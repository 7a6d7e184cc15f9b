package call

import "testing"

// BenchmarkRequestID makes a request id for a call that brings none.
func BenchmarkRequestID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if RequestID("") == "" {
			b.Fatal("no id")
		}
	}
}
