package main

import (
	"context"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backfill"
	"github.com/walrelay/walrelay/slot"
)

// runReplay is `walrelay replay`: retained outbox rows published again
// without touching the slot (backfill.Replay).
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runBackfill("replay", args, stdout, stderr, func(c config, log *zap.Logger) error {
		rp, err := backfill.NewReplay(backfill.ReplayConfig{Publishing: publishing(c, stderr), Options: c.Backfill})
		if err != nil {
			return err
		}
		conn, err := slot.Connect(ctx, c.Slot)
		if err != nil {
			return oneLine(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		report, err := rp.Run(ctx, conn, log)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, report)
		return nil
	})
}
