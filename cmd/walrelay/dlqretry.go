package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/dlq"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

// dlqRetry republishes the selected parked messages and prints, in order,
// what went out and what was left, with why.
func dlqRetry(ctx context.Context, c config, st *dlq.Store, stdout, stderr io.Writer) error {
	sel, err := c.DLQ.selection()
	if err != nil {
		return err
	}
	log, err := newLogger(c.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	pub := &sinkPublisher{cfg: c.Sink, log: log}
	res, err := st.Retry(ctx, sel, pub)
	if err != nil {
		return err
	}
	if len(res.Published)+len(res.Left) == 0 {
		if sel.MessageID != nil || sel.Position != nil {
			return fmt.Errorf("no parked message matches %s", sel)
		}
		fmt.Fprintf(stdout, "no parked messages (%s)\n", sel)
		return nil
	}
	writeRetryResult(stdout, res)
	if len(res.Left) > 0 {
		// exit 1: the lines above say which and why
		return fmt.Errorf("%d %s left parked", len(res.Left), plural(len(res.Left), "message", "messages"))
	}
	return nil
}

func writeRetryResult(w io.Writer, res dlq.Result) {
	var b strings.Builder
	for _, it := range res.Published {
		fmt.Fprintf(&b, "published  %s  %s  %s  %s\n", it.Position, idText(it.MessageID), aggregateText(it.Aggregate), dashIfEmpty(it.Type))
	}
	for _, it := range res.Left {
		fmt.Fprintf(&b, "left       %s  %s  %s  %s: %s\n", it.Position, idText(it.MessageID), aggregateText(it.Aggregate),
			dashIfEmpty(it.Type), it.Why)
	}
	fmt.Fprintf(&b, "%d published and removed, %d left parked\n", len(res.Published), len(res.Left))
	io.WriteString(w, b.String()) //nolint:errcheck // stdout
}

// sinkPublisher is dlq.Publisher over a sink of its own per call: it
// publishes the messages in order, waits for Kafka's acknowledgements and
// stops at the sink's first permanent error.
type sinkPublisher struct {
	cfg sink.Config
	log *zap.Logger
}

func (p *sinkPublisher) Publish(ctx context.Context, msgs []*schema.Message) ([]bool, error) {
	acked := make([]bool, len(msgs))
	// The sink calls back from its goroutines, never concurrently; Run
	// returns only after the last call, so acked is read safely below.
	s, err := sink.New(p.cfg, p.log, func(token uint64) { acked[token] = true })
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
