//go:build !walrelay_discard

package main

import (
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/sink"
)

// discarding reports the discarding build (build tag walrelay_discard, for
// the drain benchmark): false here, in every build that publishes.
const discarding = false

// newPublisher is the Kafka sink of a relay session.
func newPublisher(cfg sink.Config, log *zap.Logger, ack func(token uint64)) (relay.Publisher, error) {
	s, err := sink.New(cfg, log, ack)
	if err != nil {
		return nil, err // not a typed nil *sink.Sink in the interface
	}
	return s, nil
}
