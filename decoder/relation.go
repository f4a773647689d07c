package decoder

import (
	"fmt"

	"github.com/walrelay/walrelay/schema"
)

// Type OIDs of the built-in types the decoder knows (pg_type.oid).
const (
	oidBytea       = 17
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
)

// Column is one column of the outbox table as PostgreSQL describes it: a
// Relation message lists them, and so does pg_attribute (in attnum order,
// dropped columns left out, which is the order a Relation message uses).
type Column struct {
	Name string
	// Type is the column's type OID (pg_attribute.atttypid, the OID a
	// Relation message carries).
	Type uint32
	// TypeName is the type as PostgreSQL names it (format_type), for
	// messages only; empty when unknown (a Relation message carries only
	// the OID).
	TypeName string
}

// relation is what the decoder keeps of one Relation message, or of the
// columns a RowDecoder was given.
type relation struct {
	// outbox is true for a configured table, tab; rows of other tables
	// are skipped.
	outbox bool
	// tab is the outbox table of a Relation message; nil for other tables
	// and for a RowDecoder's columns.
	tab   *outboxTable
	ncols int
	// col is the column index of each field, -1 when the relation lacks it;
	// typ is that column's type OID.
	col [schema.NumFields]int
	typ [schema.NumFields]uint32
	// problem, when set, makes every row of the relation bad: a required
	// column is missing or a column has a type the decoder cannot read.
	// Its Table is unset.
	problem *ColumnError
	// names are the outbox relation's column names, for the raw row of a
	// BadRowError; nil for other tables.
	names []string
	// aggType is Config.AggregateTypeDefault (nil when unset): the
	// aggregate type of a row whose own is NULL or missing.
	aggType []byte
	// spanCol is the column index of Config.SpanContextColumn, -1 when
	// unset or absent.
	spanCol int
	// ctCol is the column index of Config.ContentTypeColumn, -1 when unset
	// or absent; ctType is its type OID.
	ctCol  int
	ctType uint32
}

// extraColumns name the columns a relation reads beside the contract's
// fields: Config.SpanContextColumn and Config.ContentTypeColumn, "" when
// unset.
type extraColumns struct{ span, contentType string }

func (cfg Config) extraColumns() extraColumns {
	return extraColumns{span: cfg.SpanContextColumn, contentType: cfg.ContentTypeColumn}
}

// relation reads a Relation message and replaces the cache entry for its
// id: Int32 relation id, String namespace, String name, Int8 replica
// identity, Int16 column count, then per column Int8 flags, String name,
// Int32 type OID, Int32 type modifier.
//
// Nothing is allocated up front for the announced columns: a count is only
// a loop bound, and the loop stops at the end of the buffer. Only the
// outbox relation's columns are kept.
func (d *Decoder) relation(r *reader) error {
	id := r.u32()
	namespace, name := r.cstring(), r.cstring()
	r.u8()
	ncols := int(r.u16())
	tab := d.outbox(namespace, name)
	outbox := tab != nil
	var cols []Column
	for i := 0; i < ncols && !r.short; i++ {
		r.u8()
		colName := r.cstring()
		typ := r.u32()
		r.u32()
		if outbox {
			cols = append(cols, Column{Name: string(colName), Type: typ})
		}
	}
	if err := r.finish(); err != nil {
		return fmt.Errorf("decode relation %d: %w", id, err)
	}
	rel := &relation{}
	if outbox {
		rel = newOutboxRelation(&tab.names, tab.aggType, tab.extras, cols)
		rel.tab = tab
	}
	d.relations[id] = rel
	return nil
}

// newOutboxRelation maps the outbox table's columns to the fields named by
// names, and checks that its rows can be decoded (checkColumns). aggType is
// Config.AggregateTypeDefault, nil when unset; extras the columns read
// beside the fields.
func newOutboxRelation(names *[schema.NumFields]string, aggType []byte, extras extraColumns, cols []Column) *relation {
	rel := &relation{outbox: true, ncols: len(cols), names: make([]string, len(cols)), aggType: aggType, spanCol: -1, ctCol: -1}
	for f := range rel.col {
		rel.col[f] = -1
	}
	for i, c := range cols {
		rel.mapColumn(names, i, c.Name, c.Type)
		rel.names[i] = c.Name
		if extras.span != "" && c.Name == extras.span && rel.spanCol < 0 {
			rel.spanCol = i
		}
		if extras.contentType != "" && c.Name == extras.contentType && rel.ctCol < 0 {
			rel.ctCol, rel.ctType = i, c.Type
		}
	}
	rel.problem = rel.checkColumns(names, cols)
	return rel
}

func (rel *relation) mapColumn(names *[schema.NumFields]string, i int, colName string, typ uint32) {
	for f, want := range names {
		if rel.col[f] < 0 && colName == want {
			rel.col[f] = i
			rel.typ[f] = typ
			return
		}
	}
}

// requiredFields must be columns of the outbox relation; the aggregate
// type only without a default.
var requiredFields = [...]schema.Field{
	schema.FieldMessageID, schema.FieldAggregateType, schema.FieldAggregateID,
	schema.FieldType, schema.FieldPayload,
}

// checkColumns finds the first reason why no row of the relation can be
// decoded: the one judgement of a table's columns, of the stream's
// relations, of RowDecoder's and of CheckColumns. cols are the columns
// rel was made of.
func (rel *relation) checkColumns(names *[schema.NumFields]string, cols []Column) *ColumnError {
	for _, f := range requiredFields {
		if rel.col[f] < 0 && (f != schema.FieldAggregateType || rel.aggType == nil) {
			return &ColumnError{Field: f, Column: names[f], Defaultable: f == schema.FieldAggregateType}
		}
	}
	for f, typ := range rel.typ {
		if i := rel.col[f]; i >= 0 && !typeAllowed(schema.Field(f), typ) {
			return &ColumnError{Field: schema.Field(f), Column: names[f], Type: typ, TypeName: cols[i].TypeName}
		}
	}
	if i := rel.ctCol; i >= 0 && !isText(rel.ctType) {
		return &ColumnError{Field: schema.FieldPayload, Column: cols[i].Name, Type: rel.ctType, TypeName: cols[i].TypeName, ContentType: true}
	}
	return nil
}

// typeAllowed says whether a field can be read from a column of type oid.
// Fields read as text (names, the aggregate id, the version) take any
// type's text form: an aggregate id may well be a uuid or a bigint column.
// The message id takes the scalar types whose text is a stable identifier
// (uuid, the integers, the text types): it is the consumers' de-duplication
// key, which a float, a timestamp or a json column would make fragile.
// Fields whose meaning depends on the type (payload, headers, occurred_at)
// take only the types listed.
func typeAllowed(f schema.Field, oid uint32) bool {
	switch f {
	case schema.FieldMessageID:
		return oid == oidUUID || oid == oidInt8 || oid == oidInt4 || oid == oidInt2 || isText(oid)
	case schema.FieldPayload:
		return oid == oidJSON || oid == oidJSONB || oid == oidBytea || isText(oid)
	case schema.FieldHeaders:
		return oid == oidJSON || oid == oidJSONB || isText(oid)
	case schema.FieldOccurredAt:
		return oid == oidTimestamptz || oid == oidTimestamp
	default:
		return true
	}
}

func isText(oid uint32) bool {
	return oid == oidText || oid == oidVarchar || oid == oidBpchar || oid == oidName
}
