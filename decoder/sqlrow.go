package decoder

import (
	"fmt"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// RowDecoder turns outbox rows read by SQL, every column cast to text, into
// messages exactly as Decoder does the stream's rows: the same checks, the
// same *BadRowError and the same Message fields, because both share the
// mapping of columns to fields and the conversion of a row.
//
// The text forms are those of the stream only when the reading session has
// the walsender's settings: DateStyle ISO and bytea_output hex (the
// PostgreSQL defaults). Not safe for concurrent use.
type RowDecoder struct {
	names [schema.NumFields]string
	opts  rowOptions
	rel   *relation
	// scratch is reused across rows: one entry per column. Decode clears
	// it before returning, so that no reference to the caller's buffers
	// outlives the call.
	scratch []value
}

// NewRowDecoder returns a decoder of the rows of the outbox table whose
// columns are cols, in the order a row's values come. cfg is validated and
// completed as by New; its Columns name the fields (its Table is not
// consulted: cols already are that table's). A table that lacks a required
// column, or has a column of a type the decoder cannot read, is no error
// here: every row then decodes to a *BadRowError, as on the stream
// (CheckColumns says it before any row is read).
func NewRowDecoder(cfg Config, cols []Column) (*RowDecoder, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	r := &RowDecoder{names: cfg.Columns.Names(), opts: cfg.rowOptions()}
	r.rel = newOutboxRelation(&r.names, defaultBytes(cfg.AggregateTypeDefault), cfg.extraColumns(), cols)
	return r, nil
}

// Decode converts one row. vals[i] is column i's text form (what `col::text`
// gives), nil for SQL NULL. pos is the message's CommitLSN and Seq, and
// commitTime its CommitTime (zero when unknown); a bad row's *BadRowError
// carries both too.
//
// The Message shares no memory with vals, which the caller may reuse at
// once (pgx reuses a row's buffers for the next row). A row whose number of
// values differs from the columns' is a caller's mistake and returns a plain
// error, not a *BadRowError.
func (r *RowDecoder) Decode(vals [][]byte, pos schema.Position, commitTime time.Time) (*schema.Message, error) {
	if len(vals) != r.rel.ncols {
		return nil, fmt.Errorf("decode row at %s: %d values for %d columns", pos, len(vals), r.rel.ncols)
	}
	r.scratch = r.scratch[:0]
	for _, b := range vals {
		r.scratch = append(r.scratch, textValue(b))
	}
	m, err := message(r.rel, &r.names, &r.opts, r.scratch, pos, commitTime)
	clear(r.scratch)
	if err != nil {
		return nil, err
	}
	ownPayload(m, r.rel.typ[schema.FieldPayload])
	return m, nil
}

// textValue is a column read by SQL: text, or null when b is nil.
func textValue(b []byte) value {
	if b == nil {
		return value{kind: 'n'}
	}
	return value{kind: 't', b: b}
}

// ownPayload copies m's payload when it is the column's bytes: message
// passes json and text payloads through, and hex-decodes only bytea into
// new bytes. The copy's capacity is its length, as the stream's payload
// capacity is capped. A tombstone's nil payload stays nil.
func ownPayload(m *schema.Message, oid uint32) {
	if oid == oidBytea || m.Tombstone {
		return
	}
	p := make([]byte, len(m.Payload))
	copy(p, m.Payload)
	m.Payload = p
}
