package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the notifier's own counters; the inbox registers its own.
type metrics struct {
	created  prometheus.Counter // tasks inserted (one per order)
	refused  prometheus.Counter // orders that cannot get an e-mail
	sent     prometheus.Counter
	failures prometheus.Counter
}

// newMetrics makes the counters and registers them with reg, unless reg is
// nil.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "notifier_email_tasks_created_total",
			Help: "Confirmation e-mail tasks inserted, one per order (an inbox transaction that then rolls back is counted too).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "notifier_orders_without_email_total",
			Help: "Order messages that cannot get a confirmation e-mail (no order id, invalid address, unreadable payload).",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "notifier_emails_sent_total",
			Help: "Confirmation e-mails the SMTP server accepted, resends after a crash included.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "notifier_email_send_failures_total",
			Help: "Attempts at sending a confirmation e-mail that failed; each is retried after a backoff.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.created, m.refused, m.sent, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
