package coherent

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	freshDesc   = prometheus.NewDesc("coherent_fresh", "1 while this replica serves from its caches (its change listener is current).", nil, nil)
	entriesDesc = prometheus.NewDesc("coherent_cache_entries", "Entries held by the caches of a table.", []string{"table"}, nil)
	lookupsDesc = prometheus.NewDesc("coherent_cache_lookups_total",
		"Cache lookups by outcome: hit, miss (loaded and kept or not), bypass (the bus was not fresh).", []string{"table", "result"}, nil)
)

// counts are one cache's lookup counters.
type counts struct{ hit, miss, bypass atomic.Uint64 }

// stats is what a cache reports to the collector.
type stats interface {
	table() string
	len() int
	counters() *counts
}

// Collector exposes the bus's freshness and its caches' sizes and lookups to Prometheus.
func (b *Bus) Collector() prometheus.Collector { return collector{b} }

type collector struct{ b *Bus }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- freshDesc
	ch <- entriesDesc
	ch <- lookupsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	fresh := 0.0
	if c.b.Fresh() {
		fresh = 1
	}
	ch <- prometheus.MustNewConstMetric(freshDesc, prometheus.GaugeValue, fresh)
	c.b.mu.Lock()
	caches := append([]stats{}, c.b.caches...)
	c.b.mu.Unlock()
	entries := map[string]int{}
	lookups := map[string]*[3]uint64{}
	for _, s := range caches {
		entries[s.table()] += s.len()
		l := lookups[s.table()]
		if l == nil {
			l = new([3]uint64)
			lookups[s.table()] = l
		}
		n := s.counters()
		l[0] += n.hit.Load()
		l[1] += n.miss.Load()
		l[2] += n.bypass.Load()
	}
	for t, n := range entries {
		ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(n), t)
	}
	for t, l := range lookups {
		for i, r := range []string{"hit", "miss", "bypass"} {
			ch <- prometheus.MustNewConstMetric(lookupsDesc, prometheus.CounterValue, float64(l[i]), t, r)
		}
	}
}
