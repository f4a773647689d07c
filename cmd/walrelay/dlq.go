package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/schema"
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
	if err := checkDLQUsage(sub, o.DLQ, stderr); err != nil {
		return err
	}
	c, err := o.resolve(s)
	if err != nil {
		return asConfigError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, dlqTimeout)
	defer cancel()
	return withStore(ctx, c, func(st *dlq.Store) error { return cmd(ctx, c, st, stdout, stderr) })
}

// checkDLQUsage refuses a command line that cannot mean anything, before
// connecting: exit 2 with the usage.
func checkDLQUsage(sub string, d dlqOptions, stderr io.Writer) error {
	var problem string
	switch {
	case sub != "list" && d.choices() != 1:
		problem = "say which messages: exactly one of --message-id, --position, --aggregate, --all"
	case sub == "discard" && strings.TrimSpace(d.Reason) == "":
		problem = "--reason is required: it is kept with the discarded messages for audit"
	case sub == "list" && d.Aggregate != "" && d.AggregateType != "":
		problem = "give --aggregate TYPE/ID or --aggregate-type T, not both"
	}
	if problem == "" {
		return nil
	}
	fmt.Fprintf(stderr, "walrelay dlq %s: %s\nRun 'walrelay dlq %s -h' for its flags.\n", sub, problem, sub)
	return errUsage
}

// choices counts the selections given.
func (d dlqOptions) choices() int {
	n := 0
	for _, set := range []bool{d.MessageID != "", d.Position != "", d.Aggregate != "", d.All} {
		if set {
			n++
		}
	}
	return n
}

// selection is the rows retry or discard act on.
func (d dlqOptions) selection() (dlq.Selection, error) {
	switch {
	case d.MessageID != "":
		id, err := schema.ParseMessageID(d.MessageID)
		if err != nil {
			return dlq.Selection{}, fmt.Errorf("--message-id: %w", err)
		}
		return dlq.Selection{MessageID: &id}, nil
	case d.Position != "":
		p, err := dlq.ParsePosition(d.Position)
		if err != nil {
			return dlq.Selection{}, fmt.Errorf("--position: %w", err)
		}
		return dlq.Selection{Position: &p}, nil
	case d.Aggregate != "":
		agg, err := parseAggregate(d.Aggregate)
		if err != nil {
			return dlq.Selection{}, err
		}
		return dlq.Selection{Aggregate: &agg}, nil
	}
	return dlq.Selection{All: true}, nil
}

// parseAggregate reads TYPE/ID; the id may itself contain slashes.
func parseAggregate(s string) (schema.Aggregate, error) {
	typ, id, ok := strings.Cut(s, "/")
	if !ok || typ == "" || id == "" {
		return schema.Aggregate{}, fmt.Errorf("--aggregate %q: want TYPE/ID, like order/42", s)
	}
	return schema.Aggregate{Type: typ, ID: id}, nil
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

func dlqDiscard(ctx context.Context, c config, st *dlq.Store, stdout, _ io.Writer) error {
	sel, err := c.DLQ.selection()
	if err != nil {
		return err
	}
	n, err := st.Discard(ctx, sel, c.DLQ.Reason)
	if err != nil {
		return err
	}
	if n == 0 && (sel.MessageID != nil || sel.Position != nil) {
		return fmt.Errorf("no parked message matches %s", sel)
	}
	fmt.Fprintf(stdout, "discarded %d parked %s (%s), reason: %s\n", n, plural(n, "message", "messages"), sel, c.DLQ.Reason)
	return nil
}
