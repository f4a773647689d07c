package sink

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sink's Prometheus collectors. Without a Registerer they
// exist but are not exported.
type metrics struct {
	published        *prometheus.CounterVec // by topic
	inFlightMessages prometheus.Gauge
	inFlightBytes    prometheus.Gauge
	retries          prometheus.Counter
	errors           *prometheus.CounterVec // by class
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.published, m.inFlightMessages, m.inFlightBytes, m.retries, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register sink metrics: %w", err)
		}
	}
	return m, nil
}
