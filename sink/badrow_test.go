package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

// A row the decoder could not decode but whose aggregate id it read blocks
// its aggregate as a refused message does: the later messages of the
// aggregate are parked behind it, in order, and other aggregates flow.
// The table has no aggregate type column: the bad row and the messages
// alike are of the default aggregate type, so they block each other.
func TestBadRowOfDefaultAggregateTypeBlocksItsAggregate(t *testing.T) {
	cols := []decoder.Column{{Name: "MessageId", Type: 2950}, {Name: "AggregateId", Type: 2950},
		{Name: "AggregateVersion", Type: 20}, {Name: "Type", Type: 25}, {Name: "Payload", Type: 25}}
	dc := decoder.Config{AggregateTypeDefault: "order", Columns: schema.Columns{MessageID: "MessageId", AggregateType: "AggregateType",
		AggregateID: "AggregateId", AggregateVersion: "AggregateVersion", Type: "Type", Payload: "Payload",
		Headers: "Headers", OccurredAt: "OccurredAt", Topic: "Topic"}}
	if err := decoder.CheckColumns(dc, cols); err != nil {
		t.Fatalf("CheckColumns = %v; want nil", err)
	}
	dec, err := decoder.NewRowDecoder(dc, cols)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "0192f1c2-7d3e-7a4b-9c5d-6e7f8091a2b3", "0192f1c2-7d3e-7a4b-9c5d-6e7f8091a2b4"
	row := func(i int, agg, version string) (*schema.Message, error) {
		id := fmt.Sprintf("0192f1c2-0000-7000-8000-%012d", i)
		vals := [][]byte{[]byte(id), []byte(agg), []byte(version), []byte("order.placed.v1"), []byte(value(i))}
		return dec.Decode(vals, schema.Position{CommitLSN: pglogrepl.LSN(1000 + i)}, time.Unix(int64(i), 0))
	}

	w := &writes{}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	ctx := context.Background()
	publish := func(i int, agg, version string) {
		t.Helper()
		m, err := row(i, agg, version)
		if bad, ok := decoder.AsBadRow(err); ok {
			if err := h.s.PublishBad(ctx, bad, uint64(i)); err != nil {
				t.Fatalf("PublishBad(%d) = %v", i, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("decode row %d: %v", i, err)
		}
		if m.AggregateType != "order" {
			t.Fatalf("row %d: aggregate type %q; want the default, order", i, m.AggregateType)
		}
		if err := h.s.Publish(ctx, m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
	}
	publish(1, a, "1")
	publish(2, a, "two") // not an integer: a bad row of aggregate order/a
	publish(3, a, "3")
	publish(4, b, "1")
	publish(5, a, "4")
	closeAndWait(t, h)

	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(1), value(4)}) {
		t.Errorf("written = %v; want rows 1 and 4 (a's before its bad row, and b's)", written)
	}
	dls := pl.get()
	if len(dls) != 3 {
		t.Fatalf("dead letters = %+v; want the bad row, then rows 3 and 5 behind it", dls)
	}
	blocker := dls[0]
	if blocker.Aggregate != (schema.Aggregate{Type: "order", ID: a}) || blocker.Message != nil || blocker.BlockedBy != nil ||
		blocker.Position.CommitLSN != 1002 {
		t.Errorf("dead letter of the bad row = %+v; want row 2 of aggregate order/%s, blocking", blocker, a)
	}
	for i, dl := range dls[1:] {
		want := pglogrepl.LSN(1003 + 2*i)
		if dl.Position.CommitLSN != want || dl.BlockedBy == nil || dl.BlockedBy.Position != blocker.Position || dl.Aggregate != blocker.Aggregate {
			t.Errorf("dead letter %d = %+v; want the row at %s, blocked by the bad row", i+1, dl, want)
		}
	}
	if v := parkedCount(t, h, parkedBlocked); v != 2 {
		t.Errorf("parked blocked = %v; want 2", v)
	}
}
