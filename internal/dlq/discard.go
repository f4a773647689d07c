package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/schema"
)

// Selection names the parked rows a Retry or Discard acts on: exactly one
// of one message (by message id or by position), one aggregate, or all.
type Selection struct {
	MessageID *schema.MessageID
	Position  *schema.Position
	Aggregate *schema.Aggregate
	All       bool
}

// String names the selection for messages.
func (sel Selection) String() string {
	switch {
	case sel.MessageID != nil:
		return "message " + sel.MessageID.String()
	case sel.Position != nil:
		return "position " + sel.Position.String()
	case sel.Aggregate != nil:
		return "aggregate " + sel.Aggregate.Type + "/" + sel.Aggregate.ID
	}
	return "all parked messages"
}

// single reports whether sel names one message.
func (sel Selection) single() bool { return sel.MessageID != nil || sel.Position != nil }

// addTo adds sel's condition to c; it fails unless exactly one choice is
// made.
func (sel Selection) addTo(c *conds) error {
	n := 0
	for _, set := range []bool{sel.MessageID != nil, sel.Position != nil, sel.Aggregate != nil, sel.All} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("select exactly one of: a message id, a position, an aggregate, all")
	}
	switch {
	case sel.MessageID != nil:
		c.add("message_id = ?", idArg(sel.MessageID))
	case sel.Position != nil:
		c.add("commit_lsn = ?::pg_lsn AND seq = ?", sel.Position.CommitLSN.String(), int64(sel.Position.Seq))
	case sel.Aggregate != nil:
		if !sel.Aggregate.Known() {
			return errors.New("an aggregate needs an id")
		}
		c.add("aggregate_type = ? AND aggregate_id = ?", sel.Aggregate.Type, sel.Aggregate.ID)
	}
	return nil
}

// ErrNoReason is returned by Discard without a reason.
var ErrNoReason = errors.New("a discard needs a reason (it is kept for audit)")

// Discard gives up the parked rows sel names: they become 'discarded', with
// the time and reason, are kept for audit and block nothing from then on.
// It returns how many rows it discarded. A Discard waits for a concurrent
// Retry of the same rows and then discards what is still parked.
func (s *Store) Discard(ctx context.Context, sel Selection, reason string) (int, error) {
	if strings.TrimSpace(reason) == "" {
		return 0, ErrNoReason
	}
	c := &conds{}
	c.add("status = 'parked'")
	if err := sel.addTo(c); err != nil {
		return 0, err
	}
	c.args = append(c.args, reason)
	sql := `UPDATE ` + s.table + ` SET status = 'discarded', discarded_at = now(), discard_reason = $` +
		fmt.Sprint(len(c.args)) + ` WHERE ` + strings.Join(c.sql, " AND ")
	tag, err := s.db.Exec(ctx, sql, c.args...)
	if err != nil {
		return 0, fmt.Errorf("discard %s: %w", sel, err)
	}
	return int(tag.RowsAffected()), nil
}
