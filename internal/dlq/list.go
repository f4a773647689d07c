package dlq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// Status is a dead letter's state.
type Status string

const (
	// Parked rows wait for an operator; those with an aggregate id block
	// the later messages of their aggregate.
	Parked Status = "parked"
	// Discarded rows were given up by an operator, with a reason; they are
	// kept for audit and block nothing.
	Discarded Status = "discarded"
)

// Filter selects dead letters for List. The zero value lists every parked
// row.
type Filter struct {
	// AggregateType and AggregateID, when set, must match exactly.
	AggregateType, AggregateID string
	// Type, when set, must match the message type exactly.
	Type string
	// Reason, when set, must occur in the reason (case-insensitive).
	Reason string
	// OlderThan and NewerThan, when positive, bound the time since the row
	// was parked.
	OlderThan, NewerThan time.Duration
	// Status defaults to Parked.
	Status Status
	// Limit, when positive, caps the rows returned.
	Limit int
}

// Entry is one dead letter as List shows it: everything but the payload,
// of which only the size is read.
type Entry struct {
	Position  schema.Position
	MessageID *schema.MessageID
	Aggregate schema.Aggregate
	// AggregateVersion is nil when the row had none.
	AggregateVersion *int64
	Type             string
	// Topic is the row's own topic override; TargetTopic where walrelay
	// meant to publish it.
	Topic, TargetTopic string
	// PayloadBytes is the payload's size; nil for a row that could not be
	// decoded, and for a tombstone (a NULL payload).
	PayloadBytes *int
	ContentType  string
	// Undecodable is set for a row that could not be decoded: it cannot be
	// retried.
	Undecodable bool
	OccurredAt  time.Time // zero when unknown
	CommittedAt time.Time // zero when unknown
	Reason      string
	BlockedBy   *schema.MessageID
	Status      Status
	ParkedAt    time.Time
	Retries     int
	LastError   string
	// DiscardedAt and DiscardReason are set for discarded rows.
	DiscardedAt   time.Time
	DiscardReason string
}

// entryColumns are the columns of an Entry, in scanEntry's order.
const entryColumns = `commit_lsn::text, seq, message_id, coalesce(aggregate_type, ''), coalesce(aggregate_id, ''),
	aggregate_version, coalesce(type, ''), coalesce(topic, ''), coalesce(target_topic, ''),
	octet_length(payload), coalesce(content_type, ''), ` + undecodable + `,
	occurred_at, committed_at, reason, blocked_by, status, parked_at, retries, coalesce(last_error, ''),
	discarded_at, coalesce(discard_reason, '')`

// undecodable holds for a row that is no whole message: walrelay could not
// decode it (row_data), or it lacks what a message cannot do without. A
// NULL payload is a tombstone's, not a lack.
const undecodable = `(row_data IS NOT NULL OR message_id IS NULL OR coalesce(aggregate_id, '') = '')`

// order is the order of every listing: by aggregate, then position.
const order = ` ORDER BY aggregate_type, aggregate_id NULLS LAST, commit_lsn, seq`

// List returns the dead letters f selects, by aggregate then position.
func (s *Store) List(ctx context.Context, f Filter) ([]Entry, error) {
	where, args, err := f.where()
	if err != nil {
		return nil, err
	}
	sql := `SELECT ` + entryColumns + ` FROM ` + s.table + ` WHERE ` + where + order
	if f.Limit > 0 {
		sql += ` LIMIT ` + strconv.Itoa(f.Limit)
	}
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters in %s: %w", s.table, err)
	}
	out, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("list dead letters in %s: %w", s.table, err)
	}
	return out, nil
}

// where is f as a condition and its arguments.
func (f Filter) where() (string, []any, error) {
	status := f.Status
	if status == "" {
		status = Parked
	}
	if status != Parked && status != Discarded {
		return "", nil, fmt.Errorf("status %q: want %s or %s", status, Parked, Discarded)
	}
	if f.OlderThan < 0 || f.NewerThan < 0 || f.Limit < 0 {
		return "", nil, fmt.Errorf("ages and limit must not be negative")
	}
	w := &conds{}
	w.add("status = ?", string(status))
	if f.AggregateType != "" {
		w.add("aggregate_type = ?", f.AggregateType)
	}
	if f.AggregateID != "" {
		w.add("aggregate_id = ?", f.AggregateID)
	}
	if f.Type != "" {
		w.add("type = ?", f.Type)
	}
	if f.Reason != "" {
		w.add("strpos(lower(reason), lower(?)) > 0", f.Reason)
	}
	if f.OlderThan > 0 {
		w.add("parked_at < now() - ? * interval '1 microsecond'", f.OlderThan.Microseconds())
	}
	if f.NewerThan > 0 {
		w.add("parked_at > now() - ? * interval '1 microsecond'", f.NewerThan.Microseconds())
	}
	return strings.Join(w.sql, " AND "), w.args, nil
}

// conds collects conditions joined by AND; each "?" becomes the next $n.
type conds struct {
	sql  []string
	args []any
}

func (c *conds) add(cond string, args ...any) {
	for _, a := range args {
		c.args = append(c.args, a)
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(c.args)), 1)
	}
	c.sql = append(c.sql, cond)
}

func scanEntry(row pgx.CollectableRow) (Entry, error) {
	var e Entry
	var lsn, status string
	var seq int64
	var id, blockedBy nullID
	var payloadBytes *int32
	var occurred, committed, discarded *time.Time
	var retries int32
	err := row.Scan(&lsn, &seq, &id, &e.Aggregate.Type, &e.Aggregate.ID,
		&e.AggregateVersion, &e.Type, &e.Topic, &e.TargetTopic,
		&payloadBytes, &e.ContentType, &e.Undecodable,
		&occurred, &committed, &e.Reason, &blockedBy, &status, &e.ParkedAt, &retries, &e.LastError,
		&discarded, &e.DiscardReason)
	if err != nil {
		return Entry{}, err
	}
	if e.Position, err = position(lsn, seq); err != nil {
		return Entry{}, err
	}
	e.MessageID, e.BlockedBy, e.Status, e.Retries = id.ptr(), blockedBy.ptr(), Status(status), int(retries)
	if payloadBytes != nil {
		n := int(*payloadBytes)
		e.PayloadBytes = &n
	}
	e.OccurredAt, e.CommittedAt, e.DiscardedAt = deref(occurred), deref(committed), deref(discarded)
	return e, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
