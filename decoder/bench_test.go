package decoder

import (
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

// BenchmarkDecodeInsert decodes one outbox row. Allocations per row beyond
// the Message: one string for all its strings, and the headers slice when
// the row has headers.
func BenchmarkDecodeInsert(b *testing.B) {
	layouts := map[string][]pgoutputtest.Column{
		"jsonb with headers": outboxColumns(),
		"jsonb no headers":   without("headers")(outboxColumns()),
	}
	for name, cols := range layouts {
		b.Run(name, func(b *testing.B) {
			d := primed(b, cols)
			msg := pgoutputtest.Insert(outboxRel, rowFor(cols, outboxRow()))
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decode(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRowDecode decodes one outbox row read by SQL. It costs what
// BenchmarkDecodeInsert does, plus the payload's copy.
func BenchmarkRowDecode(b *testing.B) {
	cols := outboxColumns()
	r, err := NewRowDecoder(Config{}, sqlColumns(cols))
	if err != nil {
		b.Fatal(err)
	}
	vals := sqlValues(b, rowFor(cols, outboxRow()))
	pos := schema.Position{CommitLSN: finalLSN}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Decode(vals, pos, commitTime); err != nil {
			b.Fatal(err)
		}
	}
}
