package observe_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orgedge/edge/edge/observe"
)

type fixedCaches map[string][3]int

func (f fixedCaches) CacheStats(yield func(name string, entries, bound int, evictions uint64)) {
	for name, v := range f {
		yield(name, v[0], v[1], uint64(v[2]))
	}
}

func TestCachesAreExposedByName(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	observe.RegisterCaches(reg, fixedCaches{"token": {3, 3, 2}}, fixedCaches{"refusal": {1, 10, 0}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = v
		}
	}
	want := map[string]float64{
		"edge_cache_entries/token": 3, "edge_cache_max_entries/token": 3, "edge_cache_evictions_total/token": 2,
		"edge_cache_entries/refusal": 1, "edge_cache_max_entries/refusal": 10, "edge_cache_evictions_total/refusal": 0,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
