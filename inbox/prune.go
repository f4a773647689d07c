package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
)

// defaultPruneBatch is Prune's batch when it is given none.
const defaultPruneBatch = 1000

// Prune deletes inbox rows of this consumer older than olderThan, batch rows
// at a time with pause between batches, and returns how many it deleted.
// olderThan must exceed the longest time a message can be delivered again:
// Kafka's retention on the topics (a consumer group reset to the earliest
// offset rereads all of it) and the relay's replays.
//
// The cut-off is fixed when Prune starts (the database's now() minus
// olderThan); a batch of 0 or less means 1000. Each batch is a transaction
// of its own, oldest rows first, so that a long prune holds no locks for
// long; Prune stops after a batch that deleted fewer than batch rows. Other
// consumers' rows are never touched. When ctx ends, Prune returns the rows
// deleted so far with the error.
func (in *Inbox) Prune(ctx context.Context, db Beginner, olderThan time.Duration, batch int, pause time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("inbox: prune older than %s: want a positive age", olderThan)
	}
	if batch <= 0 {
		batch = defaultPruneBatch
	}
	cutoff, err := in.pruneCutoff(ctx, db, olderThan)
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		n, err := in.pruneBatch(ctx, db, cutoff, batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) {
			return total, nil
		}
		if err := backoff.Sleep(ctx, pause); err != nil {
			return total, fmt.Errorf("inbox: prune: %w", err)
		}
	}
}

// pruneCutoff is the database's now() minus olderThan.
func (in *Inbox) pruneCutoff(ctx context.Context, db Beginner, olderThan time.Duration) (time.Time, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("inbox: prune: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	var cutoff time.Time
	err = tx.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, olderThan.Seconds()).Scan(&cutoff)
	if err != nil {
		return time.Time{}, fmt.Errorf("inbox: prune: read the clock: %w", err)
	}
	return cutoff, nil
}

// pruneBatch deletes up to batch rows of this consumer processed before
// cutoff, in a transaction of its own.
func (in *Inbox) pruneBatch(ctx context.Context, db Beginner, cutoff time.Time, batch int) (int64, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: begin: %w", in.c.Table, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	tag, err := tx.Exec(ctx, in.pruneSQL, in.c.ConsumerID, cutoff, batch)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: %w", in.c.Table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("inbox: prune %s: commit: %w", in.c.Table, err)
	}
	return tag.RowsAffected(), nil
}
