package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/honeai/hone/internal/db"
)

// Store is the store: its connection pools (database/sql's statistics, as go_sql_* with
// db_name "writer" and "reader"; on PostgreSQL both are the one pool) and its errors.
type Store struct {
	reg  prometheus.Registerer
	once sync.Once
}

var descStoreErrors = prometheus.NewDesc("hone:store_errors_total",
	"Store failures this process saw: unavailable (the store could not be reached) and other (a statement, begin or commit that failed otherwise).", []string{"kind"}, nil)

func newStore(reg prometheus.Registerer) *Store {
	reg.MustRegister(storeErrors{})
	return &Store{reg: reg}
}

// SetDB adds d's connection pools (once).
func (s *Store) SetDB(d *db.DB) {
	s.once.Do(func() {
		s.reg.MustRegister(collectors.NewDBStatsCollector(d.Writer(), "writer"))
		if d.Reader() != d.Writer() {
			s.reg.MustRegister(collectors.NewDBStatsCollector(d.Reader(), "reader"))
		}
	})
}

type storeErrors struct{}

func (storeErrors) Describe(ch chan<- *prometheus.Desc) { ch <- descStoreErrors }

func (storeErrors) Collect(ch chan<- prometheus.Metric) {
	unavailable, other := db.Errors()
	ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(unavailable), "unavailable")
	ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(other), "other")
}
