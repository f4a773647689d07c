package backfill

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

// Selection says which outbox rows to read. The zero Selection is every
// row. Times compare with the occurred_at column, which the table must
// then have.
type Selection struct {
	// Since, when set, keeps rows with occurred_at at or after it.
	Since *time.Time
	// Until, when set, keeps rows with occurred_at before it.
	Until *time.Time
	// AggregateType, AggregateID and Type, when set, keep rows whose column
	// equals them (compared as text, so that a uuid or bigint aggregate id
	// matches its text form).
	AggregateType, AggregateID, Type string
}

// table is what the query is built from: the outbox table's columns as
// PostgreSQL lists them and whether commit timestamps are tracked.
type table struct {
	name     schema.Table
	names    [schema.NumFields]string // the configured column of each field
	cols     []decoder.Column
	commitTS bool   // track_commit_timestamp is on
	aggType  string // decoder.Config.AggregateTypeDefault
}

// has reports whether the table has field f's column.
func (t *table) has(f schema.Field) bool {
	for _, c := range t.cols {
		if c.Name == t.names[f] {
			return true
		}
	}
	return false
}

// col is field f's column, qualified by the table's alias: in ORDER BY a
// bare name would mean the output column of that name, which is the text
// cast, and sort versions as text ("10" before "9").
func (t *table) col(f schema.Field) string { return alias + "." + schema.QuoteIdentifier(t.names[f]) }

// alias names the outbox table in the queries.
const alias = "o"

// commitMicros is a row's commit time in microseconds since 1970 as
// text, NULL when unknown (a frozen or too old transaction).
const commitMicros = "(extract(epoch from pg_xact_commit_timestamp(" + alias + ".xmin)) * 1000000)::int8"

// query is the SQL of one selection: the rows (every column as text, then
// the commit time when tracked), their count, and the order in words.
type query struct {
	rows, count string
	args        []any
	order       string
}

// build makes the query of sel over t, or says why it cannot.
func (t *table) build(sel Selection) (query, error) {
	where, args, err := t.where(sel)
	if err != nil {
		return query{}, err
	}
	list := make([]string, 0, len(t.cols)+1)
	for _, c := range t.cols {
		list = append(list, alias+"."+schema.QuoteIdentifier(c.Name)+"::text")
	}
	if t.commitTS {
		list = append(list, commitMicros+"::text")
	}
	by, words := t.orderBy()
	from := " FROM " + t.name.Quoted() + " AS " + alias + where
	return query{
		rows:  "SELECT " + strings.Join(list, ", ") + from + " ORDER BY " + by,
		count: "SELECT count(*)" + from,
		args:  args,
		order: words,
	}, nil
}

// where is the WHERE clause of sel, with its arguments.
func (t *table) where(sel Selection) (string, []any, error) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if (sel.Since != nil || sel.Until != nil) && !t.has(schema.FieldOccurredAt) {
		return "", nil, fmt.Errorf("table %s has no column %q: rows cannot be selected by time (select every row instead)",
			t.name, t.names[schema.FieldOccurredAt])
	}
	if sel.Since != nil {
		add(t.col(schema.FieldOccurredAt)+" >= $%d", *sel.Since)
	}
	if sel.Until != nil {
		add(t.col(schema.FieldOccurredAt)+" < $%d", *sel.Until)
	}
	for _, eq := range []struct {
		f schema.Field
		v string
	}{{schema.FieldAggregateType, sel.AggregateType}, {schema.FieldAggregateID, sel.AggregateID}, {schema.FieldType, sel.Type}} {
		switch {
		case eq.v == "":
		case eq.f == schema.FieldAggregateType && t.aggType != "" && !t.has(eq.f):
			// Every row has the default.
			if eq.v != t.aggType {
				conds = append(conds, "false")
			}
		case eq.f == schema.FieldAggregateType && t.aggType != "":
			args = append(args, t.aggType)
			add("coalesce("+t.col(eq.f)+"::text, $"+strconv.Itoa(len(args))+") = $%d", eq.v)
		default:
			add(t.col(eq.f)+"::text = $%d", eq.v)
		}
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// orderBy is the order the rows are published in, and the same in words:
// per aggregate, the order the stream would have published them in as
// far as the table can tell. aggregate_version first where the column
// exists (the writer's own order); then commit order where PostgreSQL
// tracks commit timestamps (rows of transactions it has no time for, the
// oldest, first); then occurred_at (when the writing transaction started);
// message_id last, so that the order is total and a second run repeats it.
func (t *table) orderBy() (sql, words string) {
	var keys, says []string
	if t.has(schema.FieldAggregateVersion) {
		keys = append(keys, t.col(schema.FieldAggregateVersion))
		says = append(says, t.names[schema.FieldAggregateVersion])
	}
	if t.commitTS {
		keys = append(keys, commitMicros+" NULLS FIRST")
		says = append(says, "commit time (track_commit_timestamp is on)")
	}
	if t.has(schema.FieldOccurredAt) {
		keys = append(keys, t.col(schema.FieldOccurredAt))
		says = append(says, t.names[schema.FieldOccurredAt])
	}
	keys = append(keys, t.col(schema.FieldMessageID))
	says = append(says, t.names[schema.FieldMessageID])
	return strings.Join(keys, ", "), strings.Join(says, ", then ")
}

// errNoColumns is a table PostgreSQL lists no column of.
var errNoColumns = errors.New("the outbox table has no columns")
