package sink

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/promreg"
	"github.com/walrelay/walrelay/schema"
)

// Metrics are the sink's Prometheus collectors. Make them once per process
// (NewMetrics) and share them between the sinks of successive sessions.
type Metrics struct {
	published        *prometheus.CounterVec // by topic
	requests         *prometheus.CounterVec // by topic
	inFlightMessages prometheus.Gauge
	inFlightBytes    prometheus.Gauge
	retries          prometheus.Counter
	errors           *prometheus.CounterVec // by class
	parked           *prometheus.CounterVec // by reason class
	parkFailures     prometheus.Counter
	blocked          prometheus.Gauge
	headersDropped   *prometheus.CounterVec // by schema.HeaderDrop
	partitions       *prometheus.GaugeVec   // by topic
	partitionChange  *prometheus.GaugeVec   // by topic
	resumeSkipped    *prometheus.CounterVec // by topic

	heldMu sync.Mutex
	held   map[string]HeldTopic // what partitionChange shows as 1
}

// HeldTopic is a topic the sink publishes nothing to because its partition
// count in Kafka differs from the one recorded for it (DECISIONS.md 36).
type HeldTopic struct {
	Topic           string
	Recorded, Kafka int
}

// Held is the topics held now, by name: what
// walrelay_topic_partition_change_pending shows as 1, for /readyz.
func (m *Metrics) Held() []HeldTopic {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	out := make([]HeldTopic, 0, len(m.held))
	for _, h := range m.held {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// setHeld records topic as held (h.Recorded != h.Kafka) or routed.
func (m *Metrics) setHeld(h HeldTopic) {
	held := h.Recorded != h.Kafka
	m.heldMu.Lock()
	if held {
		m.held[h.Topic] = h
	} else {
		delete(m.held, h.Topic)
	}
	m.heldMu.Unlock()
	v := 0.0
	if held {
		v = 1
	}
	m.partitionChange.WithLabelValues(h.Topic).Set(v)
}

// NewMetrics makes the collectors and registers them with reg, all or none;
// a nil reg keeps them private.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		held: map[string]HeldTopic{},
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_published_messages_total",
			Help: "Messages acknowledged by Kafka, by topic.",
		}, []string{"topic"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_produce_requests_total",
			Help: "Produce requests Kafka acknowledged that carried the topic's records: one carries a batch of every partition a broker leads (a retry, one partition's). walrelay_published_messages_total over it is the average request, which --kafka-linger (how long a batch waits to fill) and the batch bounds (500 records, 512 KiB a partition) set.",
		}, []string{"topic"}),
		inFlightMessages: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_sink_in_flight_messages",
			Help: "Messages published to the sink and not yet acknowledged by Kafka.",
		}),
		inFlightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_sink_in_flight_bytes",
			Help: "Size of the messages in flight (payload, strings and headers).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_sink_retries_total",
			Help: "Produce and metadata requests retried after a transient error.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_sink_errors_total",
			Help: "Produce and metadata errors, by class (transient, permanent, unknown).",
		}, []string{"class"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_parked_messages_total",
			Help: "Messages parked in the dead-letter table, by reason (kafka_refused, payload_too_large, topic_missing, topic_refused, blocked, bad_row).",
		}, []string{"reason"}),
		parkFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_park_failures_total",
			Help: "Attempts to park a message that failed and were retried (the dead-letter table could not be written).",
		}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_blocked_aggregates",
			Help: "Aggregates whose later messages are parked behind a parked message.",
		}),
		headersDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_headers_dropped_total",
			Help: "Entries of the headers column left out of a record, whose message was published without them, by reason (reserved, invalid_name, invalid_value, datacontenttype).",
		}, []string{"reason"}),
		partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_topic_partitions",
			Help: "The partition count a topic's keys are routed by (recorded in the topics table when walrelay first published to it).",
		}, []string{"topic"}),
		resumeSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_resume_skipped_messages_total",
			Help: "Messages acknowledged without producing them, because their partition's log already held them (--resume-from-kafka): replayed after a start or a failover, or written by a failed produce before its retry, by topic.",
		}, []string{"topic"}),
		partitionChange: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_topic_partition_change_pending",
			Help: "1 while walrelay publishes nothing to a topic because its partition count in Kafka differs from the recorded one, until `walrelay topics accept`.",
		}, []string{"topic"}),
	}
	// The classes exist from the start, so that a rate over them is 0, not
	// absent, before the first error.
	for _, c := range []errClass{classTransient, classPermanent, classUnknown} {
		m.errors.WithLabelValues(c.String())
	}
	for _, r := range parkReasons {
		m.parked.WithLabelValues(r)
	}
	for _, d := range schema.HeaderDrops {
		m.headersDropped.WithLabelValues(string(d))
	}
	err := promreg.Register(reg, "sink metrics", m.published, m.requests, m.inFlightMessages, m.inFlightBytes, m.retries, m.errors,
		m.parked, m.parkFailures, m.blocked, m.headersDropped, m.partitions, m.partitionChange, m.resumeSkipped)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// privateMetrics are collectors nobody exports, for a sink without
// Config.Metrics.
func privateMetrics() *Metrics {
	m, _ := NewMetrics(nil) // registers nothing, so it cannot fail
	return m
}
