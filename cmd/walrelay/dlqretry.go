package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/walrelay/walrelay/internal/dlq"
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
	pub := &sink.ListPublisher{Config: c.Sink, Log: log}
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
