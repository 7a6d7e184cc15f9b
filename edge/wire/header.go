package wire

// FirstValue is a header's first value, "" for none: FirstValue(h["Key"])
// is h.Get("Key") for a key already in canonical form, as every header
// name the edge spells out is ("Content-Type", "Grpc-Timeout"), without
// h.Get's canonicalizing of the key again on every read (a dozen reads a
// call made a tenth of the edge's own header work: docs/benchmarks.md,
// "Header reads"). A key not in canonical form is never found; staticcheck
// (SA1008, run by scripts/lint) rejects any literal or constant one that
// indexes an http.Header.
func FirstValue(values []string) string {
	if len(values) > 0 {
		return values[0]
	}
	return ""
}
