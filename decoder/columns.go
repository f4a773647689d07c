package decoder

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/schema"
)

// ColumnError says why no row of a table can be decoded with a Config: a
// required column is missing, or a column has a type its field cannot be
// read from. It is a mistake of configuration (or of the table), never of
// a row: CheckColumns reports it before anything is read, so that a
// program refuses to start on it. A table that changes while rows stream
// (ALTER TABLE) makes the rows written meanwhile *BadRowErrors with its
// reason instead, since those rows cannot be decoded whatever the
// configuration says later.
type ColumnError struct {
	// Table is the table judged (set by CheckColumns).
	Table schema.Table
	// Field is the contract field at fault, Column its configured column.
	Field  schema.Field
	Column string
	// Type is the column's type OID, 0 when the column is missing;
	// TypeName the type's name when known (Column.TypeName).
	Type     uint32
	TypeName string
	// Defaultable is true for a missing column that
	// Config.AggregateTypeDefault can stand in for.
	Defaultable bool
	// ContentType is true when the column at fault is
	// Config.ContentTypeColumn, which holds the media type of Field's
	// (the payload's) value: Column names it.
	ContentType bool
}

// CheckColumns judges the columns of cfg's table, cols, as the stream and
// RowDecoder judge them: nil when its rows can be decoded (required
// columns present, every configured column of a type its field can be read
// from; optional columns may be absent), else why not. cols are the
// table's columns as pgoutput sends them: in attnum order, without dropped
// and generated ones. cfg's defaults are filled, but it is not validated
// (New does that).
func CheckColumns(cfg Config, cols []Column) *ColumnError {
	cfg = cfg.withDefaults()
	names := cfg.Columns.Names()
	rel := newOutboxRelation(&names, defaultBytes(cfg.AggregateTypeDefault), cfg.extraColumns(), cols)
	if rel.problem == nil {
		return nil
	}
	e := *rel.problem
	e.Table = cfg.Table
	return &e
}

// AbsentColumns lists the fields whose configured column is not among
// cols: optional fields (read as null) and, with CheckColumns' consent,
// the aggregate type when it has a default.
func AbsentColumns(cfg Config, cols []Column) []schema.Field {
	cfg = cfg.withDefaults()
	names := cfg.Columns.Names()
	rel := newOutboxRelation(&names, nil, extraColumns{}, cols)
	var out []schema.Field
	for f, c := range rel.col {
		if c < 0 {
			out = append(out, schema.Field(f))
		}
	}
	return out
}

// reason is the fault in a few words, as a bad row of such a table says it.
func (e *ColumnError) reason() string {
	if e.Type == 0 {
		return "missing from the table"
	}
	return fmt.Sprintf("unsupported column type (oid %d)", e.Type)
}

// Found says what is wrong, naming the column (and the field, when the
// column is named otherwise) and the table.
func (e *ColumnError) Found() string {
	col := columnLabel(e.Column, e.Field, e.ContentType)
	if e.Type == 0 {
		return col + " is missing from " + e.Table.String()
	}
	allowed := allowedTypes(e.Field)
	if e.ContentType {
		allowed = "a content type column is text, varchar, char or name"
	}
	return fmt.Sprintf("%s of %s has type %s; %s", col, e.Table, e.typeName(), allowed)
}

// columnLabel names a column in an error: its name, and what it holds
// when the name does not say it (the field, or the content type).
func columnLabel(column string, f schema.Field, contentType bool) string {
	col := fmt.Sprintf("column %q", column)
	switch {
	case contentType:
		col += " (content type)"
	case column != f.String():
		col += " (" + f.String() + ")"
	}
	return col
}

// Fix says which setting to change, as the packages name it
// (schema.Columns.Payload, decoder.Config.AggregateTypeDefault).
func (e *ColumnError) Fix() string {
	setting := e.Field.Setting()
	if e.ContentType {
		setting = SettingContentTypeColumn
	}
	switch {
	case e.Type != 0:
		return "set " + setting + " to a column of one of those types, or change the column's type"
	case e.Defaultable:
		return "set " + e.Field.Setting() + " to its column, or " + SettingAggregateTypeDefault + " to a constant"
	}
	return "set " + e.Field.Setting() + " to the column that holds the " + strings.ReplaceAll(e.Field.String(), "_", " ")
}

// Error is one line: what is wrong and the fix.
func (e *ColumnError) Error() string { return e.Found() + "; fix: " + e.Fix() }

func (e *ColumnError) typeName() string {
	if e.TypeName != "" {
		return e.TypeName
	}
	return fmt.Sprintf("oid %d", e.Type)
}

// allowedTypes says which types a field's column may have (typeAllowed).
func allowedTypes(f schema.Field) string {
	switch f {
	case schema.FieldPayload:
		return "a payload column is jsonb, json, text, varchar, char, name or bytea"
	case schema.FieldHeaders:
		return "a headers column is jsonb, json, text, varchar, char or name"
	case schema.FieldOccurredAt:
		return "an occurred_at column is timestamptz or timestamp"
	case schema.FieldMessageID:
		return "a message id column is uuid, bigint, integer, smallint, text, varchar, char or name"
	}
	return "walrelay reads this field from any type"
}
