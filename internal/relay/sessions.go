package relay

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// Sessions say what each session of a relay is made of: a new stream of
// the slot, a new decoder and a new publisher, which starts with the
// aggregates blocked when the session starts.
type Sessions struct {
	// Slot configures the stream. Factory sets TakeOver: the relay streams
	// only as the leader, so whoever else holds the slot is a stale leader,
	// whose hold is ended rather than waited out (wal_sender_timeout).
	Slot slot.Config
	// Decoders configure the decoder: one per outbox table, in the order
	// of Message.Table (decoder.NewTables).
	Decoders []decoder.Config
	// Sink configures the publisher; Blocked is set per session, from
	// Blockers. Under the park policy its Park stores into the dead-letter
	// table (messages the sink cannot publish and rows the decoder could not
	// decode alike); without, nothing is parked, but the aggregates parked
	// earlier stay blocked.
	Sink sink.Config
	// Blockers loads the aggregates blocked now (dlq.Store.Blockers).
	// Required.
	Blockers func(ctx context.Context) ([]schema.Blocker, error)
	// NewPublisher makes a session's publisher from Sink, acknowledging to
	// ack. Required: walrelay passes the Kafka sink (sink.New), or, in its
	// discarding build, a publisher that publishes nothing.
	NewPublisher func(cfg sink.Config, log *zap.Logger, ack func(token uint64)) (Publisher, error)
}

// Factory returns the Factory of s. It fails at once on a decoder
// configuration that no session could use; the stream's metrics are
// registered with reg once and shared by the sessions.
func (s Sessions) Factory(log *zap.Logger, reg prometheus.Registerer) (Factory, error) {
	if _, err := decoder.NewTables(s.Decoders...); err != nil {
		return nil, err
	}
	sc := s.Slot
	sc.TakeOver = true
	slotMetrics := slot.NewMetrics(reg)
	return func(ctx context.Context, ack func(uint64)) (Parts, error) {
		blocked, err := s.Blockers(ctx)
		if err != nil {
			return Parts{}, err
		}
		stream, err := slot.New(sc, log, slotMetrics)
		if err != nil {
			return Parts{}, err
		}
		dec, err := decoder.NewTables(s.Decoders...)
		if err != nil {
			return Parts{}, err
		}
		cfg := s.Sink
		cfg.Blocked = blocked
		pub, err := s.NewPublisher(cfg, log, ack)
		if err != nil {
			return Parts{}, err
		}
		return Parts{Stream: stream, Decoder: dec, Publisher: pub}, nil
	}, nil
}
