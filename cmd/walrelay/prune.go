package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/slot"
)

// runPrune deletes outbox rows older than --retention whose transactions
// the slot has confirmed (see package retention), and prints one summary
// line. The slot not confirming in time is an error (exit 1), with nothing
// deleted. SIGINT or SIGTERM stops it after the batch in progress.
func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, s, err := parseOptions("prune", args, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// The usage first: a missing --retention is exit 2 before anything
	// else is looked at.
	if problem := retention.UsageProblem(o.Retention); problem != "" {
		fmt.Fprintf(stderr, "walrelay prune: %s\nRun 'walrelay prune -h' for the flags.\n", problem)
		return errUsage
	}
	c, err := o.resolve(s)
	if err != nil {
		return asConfigError(err)
	}
	log, err := newLogger(c.LogLevel, stderr)
	if err != nil {
		return asConfigError(err)
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	rc := c.Retention
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	p, err := retention.New(rc, conn, log)
	if err != nil {
		return err
	}
	res, err := p.Run(ctx)
	if res.Confirmed != 0 { // past the wait: say what was done, even when stopped
		fmt.Fprintln(stdout, retention.Summary(rc, res))
	}
	return err
}
