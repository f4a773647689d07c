package outbox

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

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

// execMode is the pgx.QueryExecMode Write passes to tx.Exec, or nil to
// keep the connection's. The parameters of the statement must take their
// types from the columns: []byte is JSON text for a jsonb column and raw
// bytes for a bytea one. The modes that do not describe the statement
// (Exec and SimpleProtocol) type them from the Go values instead, which
// fails for jsonb, so Write describes it then.
func execMode(tx pgx.Tx) any {
	conn := tx.Conn()
	if conn == nil {
		return nil
	}
	switch conn.Config().DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return pgx.QueryExecModeDescribeExec
	}
	return nil
}

// args are the parameters of forRows(len(rows)), in schema.Field order,
// after mode when it is not nil.
func args(mode any, rows []row) []any {
	a := make([]any, 0, 1+len(rows)*paramsPerRow)
	if mode != nil {
		a = append(a, mode)
	}
	for _, r := range rows {
		a = append(a, string(r.id), r.aggregateType, r.aggregateID, r.version, r.typ,
			r.payload, r.headers, r.occurredAt, r.topic)
	}
	return a
}
