package backfill

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

func testTable(commitTS bool, cols ...string) *table {
	t := &table{name: schema.Table{Schema: "public", Name: "outbox"}, names: schema.DefaultColumns().Names(), commitTS: commitTS}
	for _, c := range cols {
		t.cols = append(t.cols, decoder.Column{Name: c, Type: 25})
	}
	return t
}

var required = []string{"message_id", "aggregate_type", "aggregate_id", "type", "payload"}

// The order is the best the table allows, and says so.
func TestOrderFollowsWhatTheTableHas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		commitTS bool
		extra    []string
		sql      string
		words    string
	}{
		{"everything", true, []string{"aggregate_version", "occurred_at"},
			`o."aggregate_version", ` + commitMicros + ` NULLS FIRST, o."occurred_at", o."message_id"`,
			"aggregate_version, then commit time (track_commit_timestamp is on), then occurred_at, then message_id"},
		{"no commit timestamps", false, []string{"aggregate_version", "occurred_at"},
			`o."aggregate_version", o."occurred_at", o."message_id"`, "aggregate_version, then occurred_at, then message_id"},
		{"no version", false, []string{"occurred_at"}, `o."occurred_at", o."message_id"`, "occurred_at, then message_id"},
		{"only the required columns", false, nil, `o."message_id"`, "message_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, words := testTable(tc.commitTS, append(required, tc.extra...)...).orderBy()
			if sql != tc.sql || words != tc.words {
				t.Errorf("orderBy = %q, %q; want %q, %q", sql, words, tc.sql, tc.words)
			}
		})
	}
}

// The selection becomes a WHERE with one argument per condition; times
// need the occurred_at column.
func TestSelectionBecomesWhere(t *testing.T) {
	since, until := time.Unix(100, 0), time.Unix(200, 0)
	tb := testTable(true, append(required, "occurred_at")...)
	q, err := tb.build(Selection{Since: &since, Until: &until, AggregateType: "order", AggregateID: "42", Type: "order.paid"})
	if err != nil {
		t.Fatalf("build = %v; want a query", err)
	}
	wantWhere := ` AS o WHERE o."occurred_at" >= $1 AND o."occurred_at" < $2 AND o."aggregate_type"::text = $3 AND o."aggregate_id"::text = $4 AND o."type"::text = $5`
	if !strings.HasSuffix(q.count, wantWhere) || !strings.Contains(q.rows, wantWhere+" ORDER BY ") {
		t.Errorf("count %q, rows %q; want both with %q", q.count, q.rows, wantWhere)
	}
	if len(q.args) != 5 || q.args[0] != since || q.args[4] != "order.paid" {
		t.Errorf("args = %v; want since, until, order, 42, order.paid", q.args)
	}
	if !strings.HasPrefix(q.rows, `SELECT o."message_id"::text, o."aggregate_type"::text, o."aggregate_id"::text, o."type"::text, o."payload"::text, o."occurred_at"::text, `+commitMicros+"::text FROM") {
		t.Errorf("rows = %q; want every column as text, then the commit time", q.rows)
	}
	if q, err := tb.build(Selection{}); err != nil || strings.Contains(q.count, "WHERE") || len(q.args) != 0 {
		t.Errorf("build(every row) = %q %v, %v; want no WHERE", q.count, q.args, err)
	}
	_, err = testTable(false, required...).build(Selection{Since: &since})
	if err == nil || !strings.Contains(err.Error(), `has no column "occurred_at"`) {
		t.Errorf("build(--since) without occurred_at = %v; want the missing column named", err)
	}
}

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		took        time.Duration
		want        string
	}{
		{0, 100, time.Second, "recover: 0 of 100 rows (0%), waiting for the first acknowledgement"},
		{25, 100, 5 * time.Second, "recover: 25 of 100 rows (25%), 5 rows/s, about 15s left"},
		{0, 0, 0, "recover: 0 of 0 rows (100%), waiting for the first acknowledgement"},
	} {
		if got := progressLine("recover", tc.done, tc.total, tc.took); got != tc.want {
			t.Errorf("progressLine(%d, %d, %s) = %q; want %q", tc.done, tc.total, tc.took, got, tc.want)
		}
	}
}

func TestSnapshotNames(t *testing.T) {
	for name, ok := range map[string]bool{"00000003-00000002-1": true, "": false, "1'; DROP TABLE x; --": false} {
		if validSnapshotName(name) != ok {
			t.Errorf("validSnapshotName(%q) = %v; want %v", name, !ok, ok)
		}
	}
}

// With an aggregate type default, --aggregate-type matches the rows the
// decoder gives that type: a NULL column's, or every row's when the table
// has no such column.
func TestSelectionByDefaultAggregateType(t *testing.T) {
	tb := testTable(false, required...)
	tb.aggType = "order"
	q, err := tb.build(Selection{AggregateType: "invoice"})
	if want := ` AS o WHERE coalesce(o."aggregate_type"::text, $1) = $2`; err != nil || !strings.HasSuffix(q.count, want) ||
		len(q.args) != 2 || q.args[0] != "order" || q.args[1] != "invoice" {
		t.Errorf("build = %q %v, %v; want %q with order, invoice", q.count, q.args, err, want)
	}
	tb = testTable(false, "message_id", "aggregate_id", "type", "payload")
	tb.aggType = "order"
	for sel, want := range map[string]string{"order": ` AS o`, "invoice": ` AS o WHERE false`} {
		q, err := tb.build(Selection{AggregateType: sel})
		if err != nil || !strings.HasSuffix(q.count, want) || len(q.args) != 0 {
			t.Errorf("build(%s) without the column = %q %v, %v; want %q", sel, q.count, q.args, err, want)
		}
	}
}
