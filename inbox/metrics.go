package inbox

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/promreg"
)

// Outcomes of Handle, the values of the result label.
const (
	resultApplied   = "applied"
	resultDuplicate = "duplicate"
	resultFailed    = "failed"
)

// metrics are one consumer's series of the inbox metrics.
type metrics struct {
	applied, duplicate, failed prometheus.Counter
	seconds                    prometheus.Observer
}

// newMetrics registers the inbox metrics with reg (nil registers nothing)
// and returns the series of consumer. Several inboxes may share reg: the
// second one reuses the collectors the first registered, so billing and
// warehouse can report from one process.
func newMetrics(reg prometheus.Registerer, consumer string) (*metrics, error) {
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "walrelay_inbox_messages_total",
		Help: "Messages the inbox handled, by consumer and result: applied (effect committed), duplicate (already applied, skipped), failed (handler or database error, rolled back).",
	}, []string{"consumer", "result"})
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "walrelay_inbox_handle_seconds",
		Help:    "Time to handle one message: the inbox insert, the handler and the commit, whatever the result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"consumer"})
	var err error
	if messages, err = promreg.Shared(reg, "inbox metrics", messages); err != nil {
		return nil, err
	}
	if seconds, err = promreg.Shared(reg, "inbox metrics", seconds); err != nil {
		return nil, err
	}
	return &metrics{
		applied:   messages.WithLabelValues(consumer, resultApplied),
		duplicate: messages.WithLabelValues(consumer, resultDuplicate),
		failed:    messages.WithLabelValues(consumer, resultFailed),
		seconds:   seconds.WithLabelValues(consumer),
	}, nil
}
