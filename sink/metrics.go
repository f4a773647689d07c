package sink

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sink's Prometheus collectors. Make them once per process
// (NewMetrics) and share them between the sinks of successive sessions.
type Metrics struct {
	published        *prometheus.CounterVec // by topic
	inFlightMessages prometheus.Gauge
	inFlightBytes    prometheus.Gauge
	retries          prometheus.Counter
	errors           *prometheus.CounterVec // by class
}

// NewMetrics registers the collectors with reg; a nil reg keeps them private.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_published_messages_total",
			Help: "Messages acknowledged by Kafka, by topic.",
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
	}
	// The classes exist from the start, so that a rate over them is 0, not
	// absent, before the first error.
	for _, c := range []errClass{classTransient, classPermanent, classUnknown} {
		m.errors.WithLabelValues(c.String())
	}
	if reg != nil {
		reg.MustRegister(m.published, m.inFlightMessages, m.inFlightBytes, m.retries, m.errors)
	}
	return m
}
