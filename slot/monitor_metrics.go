package slot

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// walStatuses are the values of pg_replication_slots.wal_status; the
// walrelay_slot_wal_status gauge has one series each, 1 for the current.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

var (
	lagDesc = prometheus.NewDesc("walrelay_slot_lag_bytes",
		"Bytes of WAL the slot has not confirmed: pg_current_wal_lsn() - confirmed_flush_lsn, read from pg_replication_slots.", nil, nil)
	retainedDesc = prometheus.NewDesc("walrelay_slot_retained_wal_bytes",
		"Bytes of WAL the server keeps for the slot: pg_current_wal_lsn() - restart_lsn.", nil, nil)
	walStatusDesc = prometheus.NewDesc("walrelay_slot_wal_status",
		"The slot's wal_status: 1 for the current one of reserved, extended, unreserved and lost, 0 for the others.", []string{"status"}, nil)
	safeSizeDesc = prometheus.NewDesc("walrelay_slot_safe_wal_size_bytes",
		"Bytes of WAL the server can still write before the slot risks losing WAL it needs (pg_replication_slots.safe_wal_size); absent when max_slot_wal_keep_size is unlimited.", nil, nil)
	activeDesc = prometheus.NewDesc("walrelay_slot_active",
		"1 when a walsender holds the slot (any walrelay process), else 0.", nil, nil)
)

func (m *Monitor) newMetrics() {
	m.stalledGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "walrelay_stalled",
		Help: "1 while the stall watchdog sees the WAL move on and the slot's confirmed position stand still, with nothing in flight, for longer than the stall threshold.",
	})
	m.pollErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "walrelay_slot_poll_errors_total",
		Help: "Failed readings of the slot's figures from pg_replication_slots.",
	})
	m.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "walrelay_heartbeats_total",
		Help: "Heartbeats written into the WAL (pg_logical_emit_message) while streaming.",
	})
	m.beatErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "walrelay_heartbeat_errors_total",
		Help: "Heartbeats that could not be written.",
	})
}

// Describe and Collect make the Monitor a collector of the slot figures of
// its last reading. Figures older than three poll intervals (the server
// cannot be read) and those of a missing slot are not exported: a stale
// lag would look like a healthy one.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, retainedDesc, walStatusDesc, safeSizeDesc, activeDesc} {
		ch <- d
	}
}

func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	f, at := m.fig, m.readAt
	m.mu.Unlock()
	if !f.Exists || time.Since(at) > 3*m.cfg.PollInterval {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(lagDesc, float64(f.LagBytes()))
	gauge(retainedDesc, float64(f.RetainedBytes()))
	for _, s := range walStatuses {
		gauge(walStatusDesc, boolFloat(f.WALStatus == s), s)
	}
	if f.SafeWALSize != nil {
		gauge(safeSizeDesc, float64(*f.SafeWALSize))
	}
	gauge(activeDesc, boolFloat(f.Active))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
