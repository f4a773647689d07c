package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/promreg"
)

// metrics are the relay's collectors, shared by its sessions.
type metrics struct {
	commitToAck   prometheus.Histogram
	replayed      prometheus.Counter
	sessionErrors *prometheus.CounterVec // by class: transient, permanent
	heartbeats    prometheus.Counter
	timeline      prometheus.Gauge
	failovers     prometheus.Counter
	// rows counts the rows read of each outbox table, by Message.Table:
	// walrelay_table_rows_total's children, looked up once.
	rows []prometheus.Counter
}

// tableRow counts one row of table i, if the tables are known.
func (m *metrics) tableRow(i int) {
	if i >= 0 && i < len(m.rows) {
		m.rows[i].Inc()
	}
}

// latencyBuckets span 1ms to 5min: a healthy relay acknowledges within
// milliseconds; a Kafka outage of minutes shows in the upper buckets
// instead of piling up beyond the last one. They are dense between 5 and
// 100 ms, where a healthy p99 lies, so that histogram_quantile's
// interpolation there is off by a few milliseconds; 0.05 is a bound, so the
// share of acknowledgements within 50 ms is exact.
var latencyBuckets = []float64{.001, .0025, .005, .0075, .01, .015, .02, .03, .04, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// register makes the relay's collectors and adds them to reg, all or none;
// a nil reg keeps them private.
func (r *Relay) register(reg prometheus.Registerer, tables []string) error {
	r.m = metrics{
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "walrelay_commit_to_ack_seconds",
			Help:    "Time from a transaction's commit in PostgreSQL to Kafka's acknowledgement of each of its messages.",
			Buckets: latencyBuckets,
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_replayed_messages_total",
			Help: "Messages published again after a new replication session of this process resumed behind what Kafka had already acknowledged (known duplicates; a lower bound).",
		}),
		sessionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_session_errors_total",
			Help: "Replication sessions that ended in an error, by class: transient (a new session follows), halted (a message walrelay cannot publish, under the halt policy for bad messages; a new session follows after a long backoff) or permanent (the relay stops).",
		}, []string{"class"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_heartbeats_received_total",
			Help: "walrelay heartbeats seen in the replication stream (never published; each confirms its position once nothing is in flight).",
		}),
		timeline: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_postgres_timeline",
			Help: "The timeline of the PostgreSQL server the last replication session streamed from; it grows by one with each promotion of a standby.",
		}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_postgres_failovers_total",
			Help: "Replication sessions that found the same database system on a new timeline: a standby was promoted, and walrelay followed it.",
		}),
	}
	for _, e := range []ending{endedTransient, endedPermanent, endedHalted} {
		r.m.sessionErrors.WithLabelValues(e.label())
	}
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "walrelay_table_rows_total",
		Help: "Outbox rows read from the replication stream, by outbox table (each then published or parked; a replay after a restart counts again).",
	}, []string{"table"})
	for _, t := range tables {
		r.m.rows = append(r.m.rows, rows.WithLabelValues(t))
	}
	return promreg.Register(reg, "relay metrics", r.m.commitToAck, r.m.replayed, r.m.sessionErrors, r.m.heartbeats, r.m.timeline, r.m.failovers, rows,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "walrelay_oldest_unpublished_message_age_seconds",
			Help: "Seconds since the commit of the oldest transaction received and not yet acknowledged by Kafka; 0 when nothing is pending.",
		}, r.oldestAge),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "walrelay_streaming",
			Help: "1 while this process has a replication session streaming from the slot, else 0.",
		}, func() float64 { return boolFloat(r.Streaming()) }),
	)
}

func (r *Relay) oldestAge() float64 {
	s := r.cur.Load()
	if s == nil {
		return 0
	}
	t, ok := s.oldestCommit()
	if !ok {
		return 0
	}
	return max(0, time.Since(t).Seconds())
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
