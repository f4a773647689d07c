package sink

import (
	"context"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// ListPublisher publishes a list of messages with a sink of its own per
// call (dlq's Publisher, for `walrelay dlq retry`): in the order given,
// waiting for Kafka's acknowledgements, stopping at the sink's first
// permanent error. The zero Log logs nothing.
type ListPublisher struct {
	Config Config
	Log    *zap.Logger
}

// Publish sends msgs and reports, for each, whether Kafka acknowledged it,
// with the first error: what was not acknowledged was not published, or
// may have been but is not known to be.
func (p *ListPublisher) Publish(ctx context.Context, msgs []*schema.Message) ([]bool, error) {
	acked := make([]bool, len(msgs))
	// The sink calls back from its goroutines, never concurrently; Run
	// returns only after the last call, so acked is read safely below.
	s, err := New(p.Config, p.Log, func(token uint64) { acked[token] = true })
	if err != nil {
		return acked, err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	var pubErr error
	for i, m := range msgs {
		if pubErr = s.Publish(ctx, m, uint64(i)); pubErr != nil {
			break
		}
	}
	s.Close()
	err = <-runErr
	if pubErr != nil {
		err = pubErr
	}
	return acked, err
}
