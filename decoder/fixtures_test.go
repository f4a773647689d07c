package decoder

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// Hand-built pgoutput v1 messages, as the server sends them.

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgMicros(t time.Time) uint64 { return uint64(t.Sub(pgEpoch).Microseconds()) }

func beginMsg(final pglogrepl.LSN, t time.Time, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, pgMicros(t))
	return binary.BigEndian.AppendUint32(b, xid)
}

func commitMsg(commit, end pglogrepl.LSN, t time.Time) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, uint64(commit))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	return binary.BigEndian.AppendUint64(b, pgMicros(t))
}

type column struct {
	name string
	oid  uint32
}

func relationMsg(id uint32, namespace, name string, cols []column) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, id)
	b = append(append(b, namespace...), 0)
	b = append(append(b, name...), 0)
	b = append(b, 'd') // replica identity default
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		flags := byte(0)
		if i == 0 {
			flags = 1 // part of the key
		}
		b = append(b, flags)
		b = append(append(b, c.name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) // typmod -1
	}
	return b
}

// cell is one column value of an Insert.
type cell struct {
	kind byte // 't', 'n', 'u' or 'b'
	text string
}

func text(s string) cell { return cell{kind: 't', text: s} }

var (
	null      = cell{kind: 'n'}
	unchanged = cell{kind: 'u'}
)

func insertMsg(id uint32, cells []cell) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'I'}, id)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cells)))
	for _, c := range cells {
		b = append(b, c.kind)
		if c.kind == 't' || c.kind == 'b' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.text)))
			b = append(b, c.text...)
		}
	}
	return b
}

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

func outboxColumns() []column {
	return []column{
		{"message_id", oidUUID}, {"aggregate_type", oidText}, {"aggregate_id", oidText},
		{"aggregate_version", oidInt8}, {"type", oidText}, {"payload", oidJSONB},
		{"headers", oidJSONB}, {"occurred_at", oidTimestamptz}, {"topic", oidText},
	}
}

func outboxRow() map[string]cell {
	return map[string]cell{
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
func rowFor(cols []column, row map[string]cell) []cell {
	cells := make([]cell, len(cols))
	for i, c := range cols {
		v, ok := row[c.name]
		if !ok {
			v = null
		}
		cells[i] = v
	}
	return cells
}

func outboxInsert() []byte {
	return insertMsg(outboxRel, rowFor(outboxColumns(), outboxRow()))
}

func outboxRelation() []byte {
	return relationMsg(outboxRel, "public", "outbox_messages", outboxColumns())
}

// logicalMsg is a logical decoding message (pg_logical_emit_message).
func logicalMsg(transactional bool, lsn pglogrepl.LSN, prefix, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	b := binary.BigEndian.AppendUint64([]byte{'M', flags}, uint64(lsn))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}
