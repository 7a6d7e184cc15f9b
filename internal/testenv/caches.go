package testenv

// CacheStat is what one bounded in-process cache reports.
type CacheStat struct {
	Entries, Bound int
	Evictions      uint64
}

// CacheStats reads what src (an observe.CacheSource: authn's
// Authenticator, ratelimit's Limiter, the limits step) reports, by cache
// name.
func CacheStats(src interface {
	CacheStats(yield func(name string, entries, bound int, evictions uint64))
}) map[string]CacheStat {
	out := map[string]CacheStat{}
	src.CacheStats(func(name string, entries, bound int, evictions uint64) {
		out[name] = CacheStat{entries, bound, evictions}
	})
	return out
}
