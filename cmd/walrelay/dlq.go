package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

const dlqUsage = `Usage:
  walrelay dlq list    [--aggregate TYPE/ID | --aggregate-type T] [--type T] [--reason TEXT]
                       [--older-than 1h] [--newer-than 1h] [--status parked|discarded] [--limit N] [--json]
  walrelay dlq retry   (--message-id ID | --position LSN#SEQ | --aggregate TYPE/ID | --all)
  walrelay dlq discard (--message-id ID | --position LSN#SEQ | --aggregate TYPE/ID | --all) --reason TEXT

list shows parked messages (never their payloads). retry publishes parked messages
again, with their message ids and headers, in their order, and removes those Kafka
acknowledged; it exits 1 if any is left. discard gives messages up, keeping them
with the reason for audit. All are safe while walrelay runs.
Run 'walrelay dlq list -h' (retry, discard) for each one's flags. What retry and
discard act on (--message-id, --position, --aggregate, --all) and discard's --reason
are read from the command line only, never from a WALRELAY_* variable.
`

// dlqTimeout bounds a dlq command, publishing included: a retry holds its
// rows locked (and a relay parking behind them waits) until it ends.
const dlqTimeout = 5 * time.Minute

// runDLQ dispatches `walrelay dlq list|retry|discard`.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	var cmd func(context.Context, config, *dlq.Store, io.Writer, io.Writer) error
	switch sub {
	case "list":
		cmd = dlqList
	case "retry":
		cmd = dlqRetry
	case "discard":
		cmd = dlqDiscard
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, dlqUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "walrelay dlq: unknown command %q\n\n%s", sub, dlqUsage)
		return errUsage
	}
	o, s, err := parseOptions("dlq "+sub, rest, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// A command line that cannot mean anything is refused before connecting.
	if problem := o.DLQ.Problem(sub); problem != "" {
		fmt.Fprintf(stderr, "walrelay dlq %s: %s\nRun 'walrelay dlq %s -h' for its flags.\n", sub, problem, sub)
		return errUsage
	}
	c, err := o.resolve(s)
	if err != nil {
		return asConfigError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, dlqTimeout)
	defer cancel()
	return withStore(ctx, c, func(st *dlq.Store) error { return cmd(ctx, c, st, stdout, stderr) })
}

// withStore connects to PostgreSQL and runs fn over the dead-letter table.
func withStore(ctx context.Context, c config, fn func(*dlq.Store) error) error {
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := dlq.New(conn, c.Schema.DeadLetterTable())
	if err != nil {
		return err
	}
	return fn(st)
}

// dlqList prints the dead letters the flags select, by aggregate then
// position: a table for people or JSON for scripts.
func dlqList(ctx context.Context, c config, st *dlq.Store, stdout, stderr io.Writer) error {
	f, err := c.DLQ.Filter()
	if err != nil {
		return err
	}
	es, cut, err := st.ListCut(ctx, f)
	if err != nil {
		return err
	}
	if cut {
		fmt.Fprintf(stderr, "walrelay dlq list: more than %d rows; showing the first %d (narrow the filters or raise --limit)\n", f.Limit, f.Limit)
	}
	if c.JSON {
		return dlq.WriteJSON(stdout, es)
	}
	return dlq.WriteTable(stdout, es, time.Now())
}

// dlqRetry republishes the selected parked messages and prints, in order,
// what went out and what was left, with why.
func dlqRetry(ctx context.Context, c config, st *dlq.Store, stdout, stderr io.Writer) error {
	sel, err := c.DLQ.Selection()
	if err != nil {
		return err
	}
	log, err := newLogger(c.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	res, err := st.Retry(ctx, sel, &sink.ListPublisher{Config: c.Sink, Log: log})
	if err != nil {
		return err
	}
	return res.Report(stdout, sel)
}

// dlqDiscard gives up the selected parked messages, with the reason.
func dlqDiscard(ctx context.Context, c config, st *dlq.Store, stdout, _ io.Writer) error {
	sel, err := c.DLQ.Selection()
	if err != nil {
		return err
	}
	n, err := st.Discard(ctx, sel, c.DLQ.Reason)
	if err != nil {
		return err
	}
	return dlq.WriteDiscarded(stdout, sel, n, c.DLQ.Reason)
}
