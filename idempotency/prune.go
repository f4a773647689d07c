package idempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/backoff"
)

// Prune deletes keys older than olderThan, batch rows at a time with pause
// between batches, and returns how many it deleted. A retry of a request
// whose key was pruned runs the command again: keep keys longer than any
// client retries.
//
// olderThan must be positive; batch <= 0 means 1000. The cut-off is fixed
// once, from the database's clock, when Prune starts; each batch is a
// transaction of its own, oldest keys first, and Prune stops after a batch
// that deletes fewer than batch rows, or when ctx ends (returning what it
// deleted so far and ctx's error).
func (s *Store) Prune(ctx context.Context, db Beginner, olderThan time.Duration, batch int, pause time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("idempotency: prune keys older than %s: want a positive age", olderThan)
	}
	if batch <= 0 {
		batch = 1000
	}
	cutoff, err := s.cutoff(ctx, db, olderThan)
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		n, err := s.pruneBatch(ctx, db, cutoff, batch)
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
		if err := backoff.Sleep(ctx, pause); err != nil {
			return total, err
		}
	}
}

// cutoff is the database's now() - olderThan.
func (s *Store) cutoff(ctx context.Context, db Beginner, olderThan time.Duration) (time.Time, error) {
	var t time.Time
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT now() - $1::interval", olderThan).Scan(&t)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("idempotency: prune: read the clock: %w", err)
	}
	return t, nil
}

// pruneBatch deletes up to batch keys created before cutoff.
func (s *Store) pruneBatch(ctx context.Context, db Beginner, cutoff time.Time, batch int) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.sql.prune, cutoff, batch)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("idempotency: prune %s: %w", s.table, err)
	}
	return n, nil
}
