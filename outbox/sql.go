package outbox

import (
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/schema"
)

// paramsPerRow is the number of parameters of one row: every column.
const paramsPerRow = int(schema.NumFields)

// maxRowsPerStatement keeps a statement within PostgreSQL's 65,535
// parameters.
const maxRowsPerStatement = 65535 / paramsPerRow

// insertSQL builds the INSERT of n rows into one outbox table.
type insertSQL struct {
	table  string // quoted, schema-qualified
	prefix string // INSERT INTO table (columns) VALUES
}

func newInsertSQL(t schema.Table, c schema.Columns) insertSQL {
	names := c.Names()
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = schema.QuoteIdentifier(n)
	}
	return insertSQL{
		table:  t.Quoted(),
		prefix: "INSERT INTO " + t.Quoted() + " (" + strings.Join(quoted, ", ") + ") VALUES ",
	}
}

// forRows is the statement for n rows: a multi-row VALUES whose parameters
// take their types from the columns (so the payload column may be jsonb,
// json, text or bytea). A null occurred_at becomes now(), the transaction's
// start.
func (s insertSQL) forRows(n int) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + n*64)
	b.WriteString(s.prefix)
	for r := 0; r < n; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		for f := 0; f < paramsPerRow; f++ {
			if f == 0 {
				b.WriteByte('(')
			} else {
				b.WriteString(", ")
			}
			p := "$" + strconv.Itoa(r*paramsPerRow+f+1)
			if schema.Field(f) == schema.FieldOccurredAt {
				p = "COALESCE(" + p + ", now())"
			}
			b.WriteString(p)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// args are the parameters of forRows(len(rows)), in schema.Field order.
func args(rows []row) []any {
	a := make([]any, 0, len(rows)*paramsPerRow)
	for _, r := range rows {
		a = append(a, [16]byte(r.id), r.aggregateType, r.aggregateID, r.version, r.typ,
			r.payload, r.headers, r.occurredAt, r.topic)
	}
	return a
}
