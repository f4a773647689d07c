package leader

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/promreg"
)

// register adds walrelay_leader and walrelay_leader_changes_total, labelled
// with the slot, to reg; a nil reg keeps them private. The gauge asks Check
// at scrape time, so it also drops to 0 when the lease runs out unnoticed.
func (e *Elector) register(reg prometheus.Registerer) error {
	labels := prometheus.Labels{"slot": e.cfg.Slot}
	e.changes = prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "walrelay_leader_changes_total",
		Help:        "Times this process gained or lost leadership of the slot.",
		ConstLabels: labels,
	})
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "walrelay_leader",
		Help:        "1 while this process is the slot's leader with a valid lease, else 0.",
		ConstLabels: labels,
	}, e.leaderValue)
	return promreg.Register(reg, "leader metrics", gauge, e.changes)
}

func (e *Elector) leaderValue() float64 {
	if e.Check() == nil {
		return 1
	}
	return 0
}
