package leader

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	if reg == nil {
		return nil
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "walrelay_leader",
		Help:        "1 while this process is the slot's leader with a valid lease, else 0.",
		ConstLabels: labels,
	}, e.leaderValue)
	if err := reg.Register(gauge); err != nil {
		return fmt.Errorf("register leader metrics: %w", err)
	}
	if err := reg.Register(e.changes); err != nil {
		reg.Unregister(gauge)
		return fmt.Errorf("register leader metrics: %w", err)
	}
	return nil
}

func (e *Elector) leaderValue() float64 {
	if e.Check() == nil {
		return 1
	}
	return 0
}
