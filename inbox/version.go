package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Order is where a message's aggregate version stands against the last one
// this consumer applied for the aggregate.
type Order int

const (
	// First: no version of the aggregate was applied before.
	First Order = iota
	// Next: exactly one more than the last applied.
	Next
	// Stale: not newer than the last applied (an old or repeated version).
	Stale
	// Gap: newer than the last applied plus one; versions are missing.
	Gap
)

// String is the order's name in lower case.
func (o Order) String() string {
	switch o {
	case First:
		return "first"
	case Next:
		return "next"
	case Stale:
		return "stale"
	case Gap:
		return "gap"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// CheckVersion compares m's aggregate version with the last one applied for
// its aggregate by this consumer, in tx, and records m's version when it is
// First, Next or Gap (never moving backwards). A message without a version
// is an error.
//
// The aggregate's row is locked until tx ends, so two transactions checking
// the same aggregate take turns. Call it from the Handler, in the inbox
// transaction: a Stale message is then the handler's to skip (return nil,
// and the inbox records it as handled) or to refuse; a Gap is the handler's
// to accept or to fail, so that it is retried once the missing versions
// have been applied.
func (in *Inbox) CheckVersion(ctx context.Context, tx pgx.Tx, m Message) (Order, error) {
	if !m.HasVersion {
		return 0, fmt.Errorf("inbox: check version of message %s: it has no aggregate version", m.ID)
	}
	if m.AggregateID == "" {
		return 0, fmt.Errorf("inbox: check version of message %s: it has no aggregate id", m.ID)
	}
	args := []any{in.c.ConsumerID, m.AggregateType, m.AggregateID, m.AggregateVersion}
	// Twice at most: when a concurrent transaction inserts the aggregate's
	// first version between the two statements, the second round finds it.
	for range 2 {
		last, found, err := in.lastVersion(ctx, tx, args)
		if err != nil {
			return 0, fmt.Errorf("inbox: check version of message %s: %w", m.ID, err)
		}
		if found {
			return in.advance(ctx, tx, args, m, last)
		}
		tag, err := tx.Exec(ctx, in.versionInsertSQL, args...)
		if err != nil {
			return 0, fmt.Errorf("inbox: record version of message %s: %w", m.ID, err)
		}
		if tag.RowsAffected() == 1 {
			return First, nil
		}
	}
	return 0, fmt.Errorf("inbox: check version of message %s: the aggregate's row neither exists nor can be inserted", m.ID)
}

// lastVersion reads and locks the last version applied of the aggregate in
// args.
func (in *Inbox) lastVersion(ctx context.Context, tx pgx.Tx, args []any) (last int64, found bool, err error) {
	err = tx.QueryRow(ctx, in.versionSQL, args[:3]...).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return last, err == nil, err
}

// advance orders m after last, the locked last version, and records m's
// version when it is newer.
func (in *Inbox) advance(ctx context.Context, tx pgx.Tx, args []any, m Message, last int64) (Order, error) {
	o := Gap
	switch v := m.AggregateVersion; {
	case v <= last:
		return Stale, nil
	case v == last+1:
		o = Next
	}
	if _, err := tx.Exec(ctx, in.versionUpdateSQL, args...); err != nil {
		return 0, fmt.Errorf("inbox: record version of message %s: %w", m.ID, err)
	}
	return o, nil
}
