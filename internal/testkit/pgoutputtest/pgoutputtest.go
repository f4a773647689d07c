// Package pgoutputtest builds pgoutput messages (protocol version 1) byte
// by byte, as PostgreSQL's walsender sends them inside XLogData, for the
// tests of code that decodes them. It shares no code with the decoder.
//
// Internal: for walrelay's tests only.
package pgoutputtest

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// Epoch is PostgreSQL's epoch: its timestamps count microseconds from it.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Micros is t as a PostgreSQL timestamp.
func Micros(t time.Time) uint64 { return uint64(t.Sub(Epoch).Microseconds()) }

// Begin is 'B': the final LSN of the transaction, its commit time and xid.
func Begin(final pglogrepl.LSN, commitTime time.Time, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, Micros(commitTime))
	return binary.BigEndian.AppendUint32(b, xid)
}

// Commit is 'C': flags 0, the commit LSN, the end LSN of the transaction
// and its commit time.
func Commit(commit, end pglogrepl.LSN, commitTime time.Time) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, uint64(commit))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	return binary.BigEndian.AppendUint64(b, Micros(commitTime))
}

// Column is one column of a Relation: its name and type OID.
type Column struct {
	Name string
	OID  uint32
}

// Relation is 'R': relation id, namespace, name, replica identity default
// and the columns, the first one flagged as part of the key, each with
// type modifier -1.
func Relation(id uint32, namespace, name string, cols []Column) []byte {
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
		b = append(append(b, c.Name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.OID)
		b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) // typmod -1
	}
	return b
}

// Cell is one column value of an Insert: Kind 't' (text), 'b' (binary),
// 'n' (null) or 'u' (an unchanged TOAST value), or any other byte to test
// a decoder's refusal; Data is the value of 't' and 'b'.
type Cell struct {
	Kind byte
	Data string
}

// Text is a value in text form.
func Text(s string) Cell { return Cell{Kind: 't', Data: s} }

// Binary is a value in binary form.
func Binary(s string) Cell { return Cell{Kind: 'b', Data: s} }

var (
	// Null is a null value.
	Null = Cell{Kind: 'n'}
	// Unchanged is an unchanged TOAST value (not sent).
	Unchanged = Cell{Kind: 'u'}
)

// Insert is 'I': the relation id, 'N' and the new tuple.
func Insert(rel uint32, cells []Cell) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'I'}, rel)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cells)))
	for _, c := range cells {
		b = append(b, c.Kind)
		if c.Kind == 't' || c.Kind == 'b' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.Data)))
			b = append(b, c.Data...)
		}
	}
	return b
}

// Message is 'M', a logical decoding message (pg_logical_emit_message):
// its flags, LSN, prefix and content.
func Message(transactional bool, lsn pglogrepl.LSN, prefix, content string) []byte {
	flags := byte(0)
	if transactional {
		flags = 1
	}
	b := binary.BigEndian.AppendUint64([]byte{'M', flags}, uint64(lsn))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}
