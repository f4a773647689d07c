// Package promreg is how every walrelay component registers its Prometheus
// collectors: all of them or none, with a nil Registerer keeping them
// private (the collectors still count; nothing exports them).
//
// Components never register on the default registry: the caller hands
// them the Registerer (cmd/walrelay makes one per process).
//
// Internal: walrelay's own, shared by its packages.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs with reg, all or none: after a failure the ones
// registered are unregistered again, and the error names what (e.g.
// "slot monitor metrics"). A nil reg registers nothing.
func Register(reg prometheus.Registerer, what string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register %s: %w", what, err)
		}
	}
	return nil
}

// Shared registers c with reg, or returns the equal collector registered
// before (for components of which a process may run several, sharing one
// series family, like inboxes of several consumers). A nil reg registers
// nothing and returns c.
func Shared[C prometheus.Collector](reg prometheus.Registerer, what string, c C) (C, error) {
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
	return c, fmt.Errorf("register %s: %w", what, err)
}
