package observe

import "github.com/prometheus/client_golang/prometheus"

// A CacheSource reports its bounded in-process caches (authn's
// Authenticator, ratelimit's Limiter, the limits step): each one's name,
// the entries it holds, its bound, and the entries it evicted for room.
type CacheSource interface {
	CacheStats(yield func(name string, entries, bound int, evictions uint64))
}

// RegisterCaches exposes the caches of sources, read at each scrape:
// edge_cache_entries, edge_cache_max_entries and edge_cache_evictions_total,
// by cache.
func RegisterCaches(reg prometheus.Registerer, sources ...CacheSource) {
	reg.MustRegister(caches{sources})
}

var (
	cacheEntries = prometheus.NewDesc("edge_cache_entries",
		"Entries held by each bounded in-process cache (docs/operations.md, \"Edge memory\").", []string{"cache"}, nil)
	cacheBound = prometheus.NewDesc("edge_cache_max_entries",
		"The bound of each in-process cache: it never holds more entries.", []string{"cache"}, nil)
	cacheEvictions = prometheus.NewDesc("edge_cache_evictions_total",
		"Entries each in-process cache evicted (or turned away) for room, since start.", []string{"cache"}, nil)
)

type caches struct{ sources []CacheSource }

func (c caches) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheEntries
	ch <- cacheBound
	ch <- cacheEvictions
}

func (c caches) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sources {
		s.CacheStats(func(name string, entries, bound int, evictions uint64) {
			ch <- prometheus.MustNewConstMetric(cacheEntries, prometheus.GaugeValue, float64(entries), name)
			ch <- prometheus.MustNewConstMetric(cacheBound, prometheus.GaugeValue, float64(bound), name)
			ch <- prometheus.MustNewConstMetric(cacheEvictions, prometheus.CounterValue, float64(evictions), name)
		})
	}
}
