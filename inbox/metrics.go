package inbox

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if messages, err = register(reg, messages); err != nil {
		return nil, err
	}
	if seconds, err = register(reg, seconds); err != nil {
		return nil, err
	}
	return &metrics{
		applied:   messages.WithLabelValues(consumer, resultApplied),
		duplicate: messages.WithLabelValues(consumer, resultDuplicate),
		failed:    messages.WithLabelValues(consumer, resultFailed),
		seconds:   seconds.WithLabelValues(consumer),
	}, nil
}

// register registers c with reg, or returns the equal collector registered
// before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register inbox metrics: %w", err)
}
