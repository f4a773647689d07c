package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backfill"
)

// runRecover is `walrelay recover`: a new slot with an exported snapshot,
// and the rows of the gap published from the table as of that snapshot
// (backfill.Recover).
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runBackfill("recover", args, stdout, stderr, func(c config, log *zap.Logger) error {
		rec, err := backfill.Recover(ctx, backfill.RecoverConfig{
			Publishing: publishing(c, stderr), Options: c.Backfill,
			Schema: c.Schema, MoreSchemas: c.moreSchemas(), Slot: c.Slot, Leader: c.Leader, Park: c.Park,
			Tables:       func(ctx context.Context, conn *pgx.Conn) error { return ensureTables(ctx, conn, c) },
			CheckTimeout: startCheckTimeout,
		}, log)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, rec.Summary())
		return nil
	})
}

// runBackfill is what recover and replay share: the verb's flags parsed,
// the logger built, a warning when PostgreSQL's TLS is not verified, then
// fn.
func runBackfill(verb string, args []string, stdout, stderr io.Writer, fn func(config, *zap.Logger) error) error {
	c, log, ok, err := parseWithLogger(verb, args, stdout, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	if err := warnPostgresTLS(log, c.Slot); err != nil {
		return err
	}
	return fn(c, log)
}

// publishing is how recover and replay decode and publish, progress lines
// going to stderr.
func publishing(c config, stderr io.Writer) backfill.Publishing {
	return backfill.Publishing{Decoder: c.Decoder, More: c.decoders()[1:], Sink: c.Sink, NoPing: discarding, Progress: stderr}
}
