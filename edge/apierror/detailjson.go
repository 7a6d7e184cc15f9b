package apierror

import (
	"encoding/base64"
	"sync"
)

// maxCachedDetails bounds the JSON forms of details kept by detailJSONOf;
// maxCachedValue is the largest detail value (protobuf bytes) kept. The
// edge's own refusals repeat a handful of details (an ErrorInfo per reason,
// plan and limit, a RetryInfo per whole second), so a few hundred entries
// cover them; what passes the bound is encoded each time, as before.
const (
	maxCachedDetails = 1024
	maxCachedValue   = 512
)

// detailCache keeps the specification's JSON form of a detail by its type
// and value: encoding one runs protojson into an Any, parses that again and
// compacts it, about 15 µs and 150 allocations, for bytes that depend on
// the type and value alone. When full it is emptied and fills again.
var detailCache = struct {
	mu     sync.RWMutex
	byType map[string]map[string][]byte
	n      int
}{byType: map[string]map[string][]byte{}}

// detailJSONOf returns the JSON object of one detail as the specification
// writes it: Connect's "type" and unpadded base64 "value", then the members
// of the detail's protobuf JSON form as an Any, when that form exists and
// repeats no key. The bytes returned are shared: callers must not change
// them.
func detailJSONOf(typ string, value []byte) []byte {
	if len(value) > maxCachedValue {
		return encodeDetail(typ, value)
	}
	detailCache.mu.RLock()
	js, ok := detailCache.byType[typ][string(value)]
	detailCache.mu.RUnlock()
	if ok {
		return js
	}
	js = encodeDetail(typ, value)
	detailCache.mu.Lock()
	defer detailCache.mu.Unlock()
	if detailCache.n >= maxCachedDetails {
		clear(detailCache.byType)
		detailCache.n = 0
	}
	byValue := detailCache.byType[typ]
	if byValue == nil {
		byValue = map[string][]byte{}
		detailCache.byType[typ] = byValue
	}
	if _, dup := byValue[string(value)]; !dup {
		byValue[string(value)] = js
		detailCache.n++
	}
	return js
}

// encodeDetail is detailJSONOf without the cache.
func encodeDetail(typ string, value []byte) []byte {
	detail := object{
		{"type", quote(typ)},
		// Unpadded, as connect-go writes it.
		{"value", quote(base64.RawStdEncoding.EncodeToString(value))},
	}
	if flat, ok := withAny(detail, typ, value); ok {
		detail = flat
	}
	return detail.marshal()
}
