package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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
	if err := checkPruneUsage(o.Retention, stderr); err != nil {
		return err
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
		fmt.Fprintln(stdout, pruneSummary(rc, res))
	}
	return err
}

// checkPruneUsage refuses a missing or tiny retention period before
// connecting: exit 2.
func checkPruneUsage(p retention.Config, stderr io.Writer) error {
	var problem string
	switch {
	case p.Retention <= 0:
		problem = "--retention is required: how long to keep outbox rows, e.g. 168h"
	case p.Retention < retention.MinRetention:
		problem = fmt.Sprintf("--retention %s is under %s", p.Retention, retention.MinRetention)
	case p.Batch < 1:
		problem = fmt.Sprintf("--prune-batch %d: want at least 1", p.Batch)
	case p.Wait < 0 || p.Pause < 0:
		problem = "--prune-wait and --prune-pause must not be negative"
	}
	if problem == "" {
		return nil
	}
	fmt.Fprintf(stderr, "walrelay prune: %s\nRun 'walrelay prune -h' for the flags.\n", problem)
	return errUsage
}

// pruneSummary is the line prune prints: what went, from where, up to
// which mark, how long it took, and what a pending recovery kept.
func pruneSummary(rc retention.Config, r retention.Result) string {
	verb := "pruned"
	if r.DryRun {
		verb = "dry run: would prune"
	}
	line := fmt.Sprintf("%s %s from %s in %s (%s before %s, inserted before xid %d); slot %q confirmed %s, mark %s; took %s",
		verb, count(r.Deleted, "row", "rows"), rc.Table, count(int64(r.Batches), "batch", "batches"), rc.OccurredAt, r.Mark.Cutoff.UTC().Format(time.RFC3339), r.Mark.Xmin,
		rc.Slot, r.Confirmed, r.Mark.InsertLSN, r.Took.Round(time.Millisecond))
	if k := r.KeptForRecovery; k != nil {
		line += "; kept the rows a pending " + k.String() + " needs"
	}
	return line
}

// count is "1 row" or "2 rows".
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
