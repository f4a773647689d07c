package decoder

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
)

// Hand-built pgoutput v1 messages, as the server sends them, come from
// pgoutputtest; text, null and unchanged are its cells by short names.

func text(s string) pgoutputtest.Cell { return pgoutputtest.Text(s) }

var (
	null      = pgoutputtest.Null
	unchanged = pgoutputtest.Unchanged
)

// The standard fixture: the outbox table of the default DDL, and one row.
const (
	outboxRel = 16390
	otherRel  = 16400
	finalLSN  = pglogrepl.LSN(0x16B3748)
	endLSN    = pglogrepl.LSN(0x16B3778)
	xid       = 771
	testID    = "0192f1c2-7d3e-7a4b-9c5d-6e7f8091a2b3"
)

var commitTime = time.Date(2026, 12, 2, 13, 4, 12, 345678000, time.UTC)

func outboxColumns() []pgoutputtest.Column {
	return []pgoutputtest.Column{
		{Name: "message_id", OID: oidUUID}, {Name: "aggregate_type", OID: oidText}, {Name: "aggregate_id", OID: oidText},
		{Name: "aggregate_version", OID: oidInt8}, {Name: "type", OID: oidText}, {Name: "payload", OID: oidJSONB},
		{Name: "headers", OID: oidJSONB}, {Name: "occurred_at", OID: oidTimestamptz}, {Name: "topic", OID: oidText},
	}
}

func outboxRow() map[string]pgoutputtest.Cell {
	return map[string]pgoutputtest.Cell{
		"message_id":        text(testID),
		"aggregate_type":    text("order"),
		"aggregate_id":      text("42"),
		"aggregate_version": text("7"),
		"type":              text("order.submitted.v1"),
		"payload":           text(`{"total": 10}`),
		"headers":           text(`{"traceparent": "00-abc-def-01"}`),
		"occurred_at":       text("2026-12-02 13:04:11.123456+00"),
		"topic":             null,
	}
}

// rowFor lays out row in the order of cols; a column the row lacks is null.
func rowFor(cols []pgoutputtest.Column, row map[string]pgoutputtest.Cell) []pgoutputtest.Cell {
	cells := make([]pgoutputtest.Cell, len(cols))
	for i, c := range cols {
		v, ok := row[c.Name]
		if !ok {
			v = null
		}
		cells[i] = v
	}
	return cells
}

func outboxInsert() []byte {
	return pgoutputtest.Insert(outboxRel, rowFor(outboxColumns(), outboxRow()))
}

func outboxRelation() []byte {
	return pgoutputtest.Relation(outboxRel, "public", "outbox_messages", outboxColumns())
}
