package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// TestUndecodableRowsAreParkedAndDiscarded: rows the decoder cannot turn
// into messages are parked with all their columns (row_data) and cannot be
// retried; those without an aggregate id block nothing, those with one
// block their aggregate until discarded. A required column dropped while
// the relay runs makes the rows written meanwhile bad; once it is back,
// rows flow again; an added column is ignored.
func TestUndecodableRowsAreParkedAndDiscarded(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	dropAggregateIDConstraints(t, f)
	metrics := testkit.FreePort(t)
	r := f.Start("--metrics-addr", metrics)
	r.WaitStarted()

	b := newBook(t, f)
	nullID, emptyID := b.next("order", "").withNullID(), b.next("order", "")
	a1 := []*outRow{b.next("order", "A1"), b.next("order", "A1")}
	a2 := []*outRow{b.next("order", "A2"), b.next("order", "A2")}
	b.commit(a1[0], nullID, a2[0])
	end := b.commit(emptyID, a1[1], a2[1])
	f.WaitConfirmed(r, end, time.Minute)

	dead := deadLetters(t, f)
	expectDeadSet(t, dead, nullID, emptyID)
	expectUndecodable(t, dead, nullID, `column "aggregate_id": null`, "aggregate_id", nil)
	empty := ""
	expectUndecodable(t, dead, emptyID, `column "aggregate_id": empty`, "aggregate_id", &empty)
	rep := f.Verify(b.harnessRows(b.except(nullID, emptyID)))
	harness.AssertClean(t, rep, 0)
	n := b.checkCommitOrder(f.Topic("order"))
	t.Logf("bad row: null aggregate id parked: %q; row_data %s", dead[nullID.id].Reason, dead[nullID.id].RowDataText)
	t.Logf("bad row: empty aggregate id parked: %q; row_data %s", dead[emptyID.id].Reason, dead[emptyID.id].RowDataText)
	t.Logf("bad row: they block nothing: the %d rows of aggregates A1 and A2 around them are in Kafka in commit order (%d records checked)", rep.Delivered, n)

	stdout, stderr, code := runDLQ(t, f, "retry", "--all")
	if code != 1 || strings.Count(stdout, "walrelay could not decode this row, so it cannot be retried") != 2 ||
		!strings.Contains(stdout, "0 published and removed, 2 left parked") {
		t.Errorf("dlq retry --all of two undecodable rows: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1, both left as undecodable", code, stdout, stderr)
	}
	t.Logf("bad row: dlq retry --all (exit %d):\n%s", code, stdout)

	// A required column dropped mid-stream, then added back; then an extra
	// column.
	alter(t, f, "DROP COLUMN type")
	a3 := b.next("order", "A3").withoutType()
	a1 = append(a1, b.next("order", "A1").withoutType())
	b.commit(a3, a1[2])
	alter(t, f, "ADD COLUMN type text")
	a4 := []*outRow{b.next("order", "A4")}
	a1 = append(a1, b.next("order", "A1"))
	a2 = append(a2, b.next("order", "A2"))
	b.commit(a1[3], a4[0], a2[2])
	alter(t, f, "ADD COLUMN tenant text")
	a4 = append(a4, b.next("order", "A4").withTenant("acme"))
	a2 = append(a2, b.next("order", "A2").withTenant("acme"))
	f.WaitConfirmed(r, b.commit(a4[1], a2[3]), time.Minute)

	dead = deadLetters(t, f)
	expectDeadSet(t, dead, nullID, emptyID, a3, a1[2], a1[3])
	aggID := "A3"
	expectUndecodable(t, dead, a3, `column "type": missing from the table`, "aggregate_id", &aggID)
	aggID = "A1"
	expectUndecodable(t, dead, a1[2], `column "type": missing from the table`, "aggregate_id", &aggID)
	for _, r := range []*outRow{a3, a1[2]} {
		if _, ok := dead[r.id].RowData["type"]; ok {
			t.Errorf("row_data of %s/%s v%d has a type column; want the columns the row had", r.aggType, r.aggID, r.version)
		}
	}
	expectBlocked(t, dead, a1[3], a1[2])
	delivered := b.except(nullID, emptyID, a3, a1[2], a1[3])
	rep = f.Verify(b.harnessRows(delivered))
	harness.AssertClean(t, rep, 0)
	t.Logf("column dropped: rows written without the type column parked: %q; row_data %s", dead[a3.id].Reason, dead[a3.id].RowDataText)
	t.Logf("column dropped: A1's next row, written after the column was back, parked behind A1's bad row: %q", dead[a1[3].id].Reason)
	t.Logf("column back, extra column tenant added: A2 v3, v4 and A4 v1, v2 published (no tenant header); %d rows in Kafka, %d in the dead-letter table, %d written",
		rep.Delivered, len(dead), len(b.rows))
	counts := parkedByReason(t, metrics)
	if counts["bad_row"] != 4 || counts["blocked"] != 1 {
		t.Errorf("walrelay_parked_messages_total %v; want bad_row 4, blocked 1", counts)
	}
	t.Logf("bad row: walrelay_parked_messages_total %v", counts)

	// The operator discards the undecodable rows with a reason; A1's
	// blocked message can then be retried, and A1's next row follows it.
	discardReasons := map[*outRow]string{nullID: "null aggregate id: the order service re-emitted the event",
		emptyID: "empty aggregate id: test row", a3: "written while the type column was missing", a1[2]: "written while the type column was missing"}
	for row, reason := range discardReasons {
		args := []string{"--message-id", row.id, "--reason", reason}
		if row == nullID {
			args = []string{"--position", dead[row.id].Position, "--reason", reason}
		}
		if stdout, stderr, code := runDLQ(t, f, "discard", args...); code != 0 || !strings.Contains(stdout, "discarded 1 parked message") {
			t.Errorf("dlq discard %v: exit %d, stdout %q, stderr %q; want one discarded", args, code, stdout, stderr)
		}
	}
	dead = deadLetters(t, f)
	for row, reason := range discardReasons {
		d := dead[row.id]
		if d.Status != "discarded" || d.DiscardReason == nil || *d.DiscardReason != reason || d.DiscardedAt == nil || len(d.RowData) == 0 {
			t.Errorf("%s after discard: status %s, discard_reason %v, discarded_at %v, row_data %v; want discarded, %q, a time, the row kept",
				row.id, d.Status, d.DiscardReason, d.DiscardedAt, d.RowData, reason)
		}
	}
	t.Logf("discard: 4 undecodable rows discarded; audit: status=discarded, discard_reason and discarded_at set, row_data kept, e.g. %q at %s",
		*dead[a3.id].DiscardReason, dead[a3.id].DiscardedAt.Format(time.RFC3339))
	retryAggregate(t, f, "order/A1", 0, a1[3:], nil)
	a1 = append(a1, b.next("order", "A1"))
	f.WaitConfirmed(r, b.commit(a1[4]), time.Minute)
	got := b.idsInKafka("A1")
	want := []string{a1[0].id, a1[1].id, a1[3].id, a1[4].id}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("A1 in Kafka: %v; want v1, v2, v4 (retried), v5 (new): %v", got, want)
	}
	if left := parkedOnly(deadLetters(t, f)); len(left) != 0 {
		t.Errorf("after discarding and retrying: %d rows still parked; want none", len(left))
	}
	t.Logf("discard: with its blocker discarded, dlq retry --aggregate order/A1 published v4; the relay then published the new v5 after it: A1 in Kafka is v1, v2, v4, v5")
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay exit code after SIGTERM = %d; want 0", code)
	}
}

// dropAggregateIDConstraints lets the test table take null and empty
// aggregate ids, as a table made without `walrelay schema` might.
func dropAggregateIDConstraints(t *testing.T, f *harness.Fixture) {
	t.Helper()
	ctx := context.Background()
	var check string
	testkit.Must(t, f.DB.QueryRow(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'
		AND pg_get_constraintdef(oid) LIKE '%aggregate_id%'`, f.Table).Scan(&check), "find the CHECK on aggregate_id")
	alter(t, f, `DROP CONSTRAINT "`+check+`"`)
	alter(t, f, "ALTER COLUMN aggregate_id DROP NOT NULL")
}

func alter(t *testing.T, f *harness.Fixture, change string) {
	t.Helper()
	_, err := f.DB.Exec(context.Background(), "ALTER TABLE "+f.Table+" "+change)
	testkit.Must(t, err, "alter table %s %s", f.Table, change)
}
