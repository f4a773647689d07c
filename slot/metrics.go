package slot

import (
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/promreg"
)

// Metrics are the stream's gauges (the slot's lag comes from the Monitor,
// which reads it from pg_replication_slots). Create them once per process.
type Metrics struct {
	confirmed  prometheus.Gauge
	lastStatus prometheus.Gauge
}

// NewMetrics registers the gauges with reg; a nil reg keeps them private.
// Registering them twice with one reg is a programming error: it panics,
// as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		confirmed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_confirmed_lsn",
			Help: "WAL position last confirmed to PostgreSQL in a standby status update, as a byte offset.",
		}),
		lastStatus: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_last_status_update_timestamp_seconds",
			Help: "Unix time of the last standby status update sent to PostgreSQL.",
		}),
	}
	if err := promreg.Register(reg, "slot stream metrics", m.confirmed, m.lastStatus); err != nil {
		panic(err)
	}
	return m
}

func (m *Metrics) statusSent(confirmed pglogrepl.LSN) {
	m.confirmed.Set(float64(confirmed))
	m.lastStatus.Set(float64(time.Now().UnixNano()) / 1e9)
}
