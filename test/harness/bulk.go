package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
)

// Bulk is a backlog of outbox rows written by SQL alone, fast (a 100,000
// rows in a few seconds): what a recovery or a replay reads back.
type Bulk struct {
	Rows       int      // rows in all
	Aggregates int      // row g (0, 1, ...) belongs to aggregate g mod Aggregates, at version g / Aggregates + 1
	Types      []string // aggregate types, by aggregate: aggregate k is of type Types[k mod len(Types)]
	Payload    int      // bytes of padding in each payload (a JSON object of about that size)
	// OccurredAt is row 0's occurred_at; row g's is g microseconds later,
	// so that occurred_at orders the rows as they were written. The zero
	// time is the transaction's start, as the column's default would be.
	OccurredAt time.Time
	// Batch is the rows per transaction (Rows when 0).
	Batch int
	// Prefix starts every aggregate id (the fixture's id when empty): a
	// second bulk on the same table gets aggregates of its own with another.
	Prefix string
}

// WriteBulk commits b's rows, Batch rows per transaction in the order of g,
// and returns how many it wrote.
func (f *Fixture) WriteBulk(ctx context.Context, b Bulk) int {
	f.t.Helper()
	batch := b.Batch
	if batch <= 0 {
		batch = b.Rows
	}
	prefix := b.Prefix
	if prefix == "" {
		prefix = f.ID
	}
	for from := 0; from < b.Rows; from += batch {
		to := min(from+batch, b.Rows) - 1
		_, err := f.DB.Exec(ctx, `INSERT INTO `+f.Table+` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload, occurred_at)
			SELECT gen_random_uuid(), ($3::text[])[1 + (g % $4) % cardinality($3::text[])], $5 || '-a' || (g % $4), g / $4 + 1, 'order.submitted.v1',
				jsonb_build_object('n', g, 'pad', repeat('x', $6)),
				coalesce($7::timestamptz, now()) + g * interval '1 microsecond'
			FROM generate_series($1::bigint, $2::bigint) g`,
			from, to, b.Types, b.Aggregates, prefix, b.Payload, nullTime(b.OccurredAt))
		testkit.Must(f.t, err, "write rows %d to %d of %d", from, to, b.Rows)
	}
	return b.Rows
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// OccurredAt is the occurred_at of the row that is nth (0, 1, ...) in the
// order of occurred_at then message_id.
func (f *Fixture) OccurredAt(nth int) time.Time {
	f.t.Helper()
	var at time.Time
	err := f.DB.QueryRow(context.Background(), `SELECT occurred_at FROM `+f.Table+` ORDER BY occurred_at, message_id OFFSET $1 LIMIT 1`, nth).Scan(&at)
	testkit.Must(f.t, err, "occurred_at of row %d", nth)
	return at
}

// CountSince is how many outbox rows occurred at or after since.
func (f *Fixture) CountSince(since time.Time) int {
	f.t.Helper()
	var n int
	err := f.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+f.Table+` WHERE occurred_at >= $1`, since).Scan(&n)
	testkit.Must(f.t, err, "count the rows since %s", since.Format(time.RFC3339Nano))
	return n
}

// String says what the bulk is, for logs.
func (b Bulk) String() string {
	return fmt.Sprintf("%d rows over %d aggregates of %v, %d-byte padding", b.Rows, b.Aggregates, b.Types, b.Payload)
}
