package decoder

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

// Several outbox tables through one stream: each row is decoded with its
// own table's columns and options and says which table it is from; the
// rows of one transaction are numbered together, whatever their table, so
// that their Positions stay unique; a table not configured is skipped.
func TestDecodeSeveralTables(t *testing.T) {
	billing := schema.Table{Schema: "billing", Name: "OutboxMessages"}
	efCols := schema.Columns{MessageID: "Id", AggregateType: "AggregateType", AggregateID: "AggregateId",
		AggregateVersion: "AggregateVersion", Type: "Type", Payload: "Payload", Headers: "Headers",
		OccurredAt: "OccurredAtUtc", Topic: "Topic"}
	d, err := NewTables(Config{}, Config{Table: billing, Columns: efCols, AggregateTypeDefault: "invoice", ContentType: "application/json"})
	if err != nil {
		t.Fatalf("NewTables: %v", err)
	}
	const billingRel = 16500
	ef := []pgoutputtest.Column{
		{Name: "Id", OID: oidUUID}, {Name: "AggregateId", OID: oidText}, {Name: "Type", OID: oidText},
		{Name: "Payload", OID: oidText}, {Name: "OccurredAtUtc", OID: oidTimestamptz},
	}
	efRow := map[string]pgoutputtest.Cell{
		"Id": text("0192f1c2-7d3e-7a4b-9c5d-000000000001"), "AggregateId": text("INV-1"),
		"Type": text("invoice.issued.v1"), "Payload": text(`{"n": 1}`), "OccurredAtUtc": text("2026-12-02 13:04:11+00"),
	}
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	mustDecode(t, d, outboxRelation(), KindSkip)
	mustDecode(t, d, pgoutputtest.Relation(billingRel, "billing", "OutboxMessages", ef), KindSkip)
	mustDecode(t, d, pgoutputtest.Relation(otherRel, "billing", "invoices", ef), KindSkip)

	first := mustDecode(t, d, outboxInsert(), KindMessage).Message
	second := mustDecode(t, d, pgoutputtest.Insert(billingRel, rowFor(ef, efRow)), KindMessage).Message
	mustDecode(t, d, pgoutputtest.Insert(otherRel, rowFor(ef, efRow)), KindSkip)
	third := mustDecode(t, d, outboxInsert(), KindMessage).Message

	for i, c := range []struct {
		m                    *schema.Message
		table                int
		seq                  uint32
		aggType, contentType string
	}{
		{first, 0, 0, "order", "application/json"},
		{second, 1, 1, "invoice", "application/json"},
		{third, 0, 2, "order", "application/json"},
	} {
		if c.m.Table != c.table || c.m.Seq != c.seq || c.m.AggregateType != c.aggType || c.m.ContentType != c.contentType {
			t.Errorf("message %d: table %d, seq %d, aggregate type %q, content type %q; want table %d, seq %d, %q, %q",
				i, c.m.Table, c.m.Seq, c.m.AggregateType, c.m.ContentType, c.table, c.seq, c.aggType, c.contentType)
		}
	}
	if second.AggregateID != "INV-1" || second.Type != "invoice.issued.v1" || string(second.Payload) != `{"n": 1}` {
		t.Errorf("billing's row: %+v; want its own columns read", second)
	}

	// A bad row of the second table says which table it is from.
	bad := map[string]pgoutputtest.Cell{"Id": text("0192f1c2-7d3e-7a4b-9c5d-000000000002"), "AggregateId": text("INV-2"), "Type": null, "Payload": text("{}")}
	_, err = d.Decode(pgoutputtest.Insert(billingRel, rowFor(ef, bad)))
	var be *BadRowError
	if !errors.As(err, &be) || be.Table != 1 || be.Seq != 3 {
		t.Errorf("bad row of billing: %v (%+v); want a BadRowError of table 1 at seq 3", err, be)
	}
}

func TestNewTablesRefusals(t *testing.T) {
	if _, err := NewTables(); err == nil || !strings.Contains(err.Error(), "no outbox table") {
		t.Errorf("NewTables(): %v; want no outbox table", err)
	}
	a := Config{Table: schema.Table{Schema: "public", Name: "a"}}
	if _, err := NewTables(a, Config{Table: schema.Table{Name: "a"}}); err == nil || !strings.Contains(err.Error(), "table public.a is given twice") {
		t.Errorf("a table twice (public by default): %v; want it refused", err)
	}
	if _, err := NewTables(a, Config{ContentType: "json"}); err == nil || !strings.Contains(err.Error(), "table 2 of 2: ") {
		t.Errorf("a bad second table: %v; want it named", err)
	}
}
