package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// efShape is an existing outbox table of another tool: the reference
// design's OutboxMessage entity as EF Core and Npgsql map it, with quoted
// PascalCase names, a uuid aggregate id, a text payload and no aggregate
// type column, in a schema of the test's own. Its owner applies `walrelay
// schema --existing` with the column flags (read against the table as its
// owner): the publication, the dead-letter, recoveries and topics tables
// and the grants, nothing for the table itself.
type efShape struct {
	t     *testing.T
	f     *harness.Fixture
	table schema.Table
	pub   string
	cols  []string // the table's --column-* flags
}

const efTableSQL = ` ("MessageId" uuid PRIMARY KEY, "AggregateId" uuid NOT NULL, "AggregateVersion" bigint NOT NULL,
	"Type" text NOT NULL, "Payload" text NOT NULL, "OccurredAtUtc" timestamptz NOT NULL, "AvailableAtUtc" timestamptz NOT NULL)`

func newEFShape(t *testing.T) *efShape {
	t.Helper()
	return newShape(t, "ef_", "OutboxMessages", efTableSQL, "--column-message-id", "MessageId", "--column-aggregate-id", "AggregateId",
		"--column-aggregate-version", "AggregateVersion", "--column-type", "Type", "--column-payload", "Payload", "--column-occurred-at", "OccurredAtUtc")
}

// newShape makes a table of another shape, name with columns tableSQL, in
// a schema of the test's own whose name starts with prefix; cols are the
// --column-* flags that point walrelay at it.
func newShape(t *testing.T, prefix, name, tableSQL string, cols ...string) *efShape {
	t.Helper()
	return newNamedShape(t, func(id string) (schema.Table, string) {
		return schema.Table{Schema: prefix + id, Name: name}, "pub_" + prefix + id
	}, tableSQL, cols...)
}

// newNamedShape is newShape with the table's schema (made by the test)
// and name, and the publication's name, given by names from the
// fixture's unique id.
func newNamedShape(t *testing.T, names func(id string) (schema.Table, string), tableSQL string, cols ...string) *efShape {
	t.Helper()
	f := harness.New(t, "order")
	table, pub := names(f.ID)
	s := &efShape{t: t, f: f, table: table, pub: pub, cols: cols}
	t.Cleanup(func() {
		ctx := context.Background()
		f.DB.Exec(ctx, "DROP PUBLICATION IF EXISTS "+schema.QuoteIdentifier(s.pub))                //nolint:errcheck // best effort
		f.DB.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema.QuoteIdentifier(s.table.Schema)+" CASCADE") //nolint:errcheck // best effort
	})
	s.exec("CREATE SCHEMA " + schema.QuoteIdentifier(s.table.Schema))
	s.exec("CREATE TABLE " + s.table.Quoted() + tableSQL)
	// --aggregate-type-default passes the check of a table without an
	// aggregate type column (EF Core's); the DDL does not depend on it.
	ddl := f.WalrelayOK("schema", append(s.flags(), "--existing", "--postgres-url", f.PGURL, "--aggregate-type-default", "order",
		"--grant-to", harness.RelayRole)...)
	err := harness.ExecGrants(context.Background(), f.DB, ddl)
	testkit.Must(t, err, "apply `walrelay schema` DDL")
	return s
}

// flags point walrelay at the table: --table, --publication and a
// --column-* flag for each column named otherwise than walrelay's.
func (s *efShape) flags(extra ...string) []string {
	flags := append([]string{"--table", s.table.String(), "--publication", s.pub}, s.cols...)
	return append(flags, extra...)
}

func (s *efShape) exec(sql string, args ...any) {
	s.t.Helper()
	_, err := s.f.DB.Exec(context.Background(), sql, args...)
	testkit.Must(s.t, err, "%s", strings.SplitN(sql, "\n", 2)[0])
}

func (s *efShape) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	testkit.Must(s.t, s.f.DB.QueryRow(context.Background(), sql, args...).Scan(&n), "%s", sql)
	return n
}

// parked is the number of rows in the table's dead-letter table.
func (s *efShape) parked() int {
	return s.count("SELECT count(*) FROM " + schema.Table{Schema: s.table.Schema, Name: s.table.Name + "_dead_letters"}.Quoted())
}

// efRow is one row of the EF Core table; empty type makes it undecodable.
type efRow struct {
	id, aggregate schema.MessageID
	version       int64
	typ, payload  string
	at            time.Time
}

// write inserts rows in one transaction.
func (s *efShape) write(rows ...efRow) {
	s.t.Helper()
	err := pgx.BeginFunc(context.Background(), s.f.DB, func(tx pgx.Tx) error {
		for _, r := range rows {
			_, err := tx.Exec(context.Background(), "INSERT INTO "+s.table.Quoted()+
				` ("MessageId", "AggregateId", "AggregateVersion", "Type", "Payload", "OccurredAtUtc", "AvailableAtUtc")
				VALUES ($1, $2, $3, $4, $5, $6, $6)`, r.id.String(), r.aggregate.String(), r.version, r.typ, r.payload, r.at)
			if err != nil {
				return err
			}
		}
		return nil
	})
	testkit.Must(s.t, err, "write %d rows", len(rows))
}

// expectRefused runs init, check and run, each of which must fail at
// start with exit code 1 and the one line of the "table columns" rule,
// saying want (and check reporting it as its failed check).
func (s *efShape) expectRefused(t *testing.T, extra []string, want ...string) {
	t.Helper()
	for _, verb := range []string{"init", "run"} {
		start := time.Now()
		_, stderr, code := s.f.Walrelay(verb, s.flags(extra...)...)
		line := lastLine(stderr)
		if code != 1 || !strings.HasPrefix(line, "walrelay: table columns: ") || !containsAll(line, want) {
			t.Errorf("walrelay %s: exit %d, last line %q; want exit 1 and `walrelay: table columns: ...` saying %q\n%s", verb, code, line, want, stderr)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("walrelay %s took %s to fail; want it at start", verb, took)
		}
		t.Logf("walrelay %s (exit %d): %s", verb, code, line)
	}
	_, report := runCheck(t, s.f, s.flags(extra...)...)
	for _, c := range report.Checks {
		if c.Name == "table columns" {
			line := c.Found + "; fix: " + c.Fix
			if c.Status != "fail" || !containsAll(line, want) {
				t.Errorf("check table columns: %s, %q; want fail saying %q", c.Status, line, want)
			}
		}
	}
	if report.status("table columns") != "fail" {
		t.Errorf("check: table columns %s; want fail", report.status("table columns"))
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// The EF Core table: without --aggregate-type-default, init, check and run
// refuse it at start, naming the column and the flags, and nothing is
// parked or created; with it, rows written in several transactions reach
// Kafka with the uuid's text as key, the default in the topic and the
// aggregate_type header, the text payload's bytes and order per aggregate,
// and an undecodable row whose aggregate id is readable blocks its
// aggregate's later row. A payload column changed to integer is refused at
// start again.
func TestEFCoreOutboxTable(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	s := newEFShape(t)
	f := s.f

	// (a) No aggregate type column, no default: a configuration error.
	s.expectRefused(t, nil, `column "aggregate_type" is missing from `+s.table.String(),
		"fix: set --column-aggregate-type to its column, or --aggregate-type-default to a constant")
	if n := s.count("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.Slot); n != 0 {
		t.Errorf("slots named %s after the refused init: %d; want none", f.Slot, n)
	}
	if n := s.parked(); n != 0 {
		t.Errorf("parked rows: %d; want none", n)
	}

	// (b) With the default.
	withDefault := []string{"--aggregate-type-default", "order"}
	f.WalrelayOK("init", s.flags(withDefault...)...)
	_, report := runCheck(t, f, s.flags(withDefault...)...)
	if report.Fail != 0 {
		t.Errorf("check with --aggregate-type-default: %d failed; want none", report.Fail)
	}
	for _, c := range report.Checks {
		if c.Name == "table columns" && (c.Status != "ok" || !strings.Contains(c.Found, `no column "aggregate_type": every row's aggregate type is "order" (--aggregate-type-default)`)) {
			t.Errorf("check table columns: %s %q; want ok, saying the default stands in for the column", c.Status, c.Found)
		}
	}
	r := f.Run(s.flags(withDefault...)...)
	r.WaitStarted()

	aggs := []schema.MessageID{outbox.NewID(), outbox.NewID(), outbox.NewID()}
	versions := map[schema.MessageID]int64{}
	var delivered []harness.Row
	base := time.Now().UTC().Truncate(time.Microsecond)
	next := func(agg schema.MessageID, payload string) efRow {
		versions[agg]++
		v := versions[agg]
		return efRow{id: outbox.NewID(), aggregate: agg, version: v, typ: "order.placed.v1", payload: payload,
			at: base.Add(time.Duration(len(versions)*100+int(v)) * time.Millisecond)}
	}
	keep := func(rows ...efRow) []efRow {
		for _, r := range rows {
			delivered = append(delivered, harness.Row{ID: r.id.String(), AggregateType: "order", AggregateID: r.aggregate.String(),
				Version: &r.version, Type: r.typ, Payload: r.payload, OccurredAt: r.at, ContentType: "text/plain; charset=utf-8"})
		}
		return rows
	}
	for tx := range 4 {
		var rows []efRow
		for i, agg := range aggs {
			payload := fmt.Sprintf(`{"order":%d,"tx":%d}`, i, tx)
			if i == 1 {
				payload = fmt.Sprintf("plain text, ünïcode, tx %d", tx)
			}
			rows = append(rows, next(agg, payload), next(agg, payload+" again"))
		}
		s.write(keep(rows...)...)
	}
	// An undecodable row (empty type) of the third aggregate, its aggregate
	// id readable, and that aggregate's next row in a later transaction.
	bad := next(aggs[2], `{"bad":true}`)
	bad.typ = ""
	s.write(bad)
	behind := next(aggs[2], `{"behind":true}`)
	s.write(behind)
	s.write(keep(next(aggs[0], `{"last":true}`))...)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)

	rep := f.Verify(delivered)
	harness.AssertClean(t, rep, 0)
	n := s.count("SELECT count(*) FROM "+schema.Table{Schema: s.table.Schema, Name: s.table.Name + "_dead_letters"}.Quoted()+
		" WHERE (message_id = $1 AND blocked_by IS NULL AND aggregate_type = 'order' AND aggregate_id = $2 AND reason LIKE '%column \"Type\" (type): empty%')"+
		" OR (message_id = $3 AND blocked_by = $1 AND aggregate_type = 'order' AND aggregate_id = $2)",
		bad.id.String(), bad.aggregate.String(), behind.id.String())
	if n != 2 || s.parked() != 2 {
		t.Errorf("dead letters: %d of 2 as wanted, %d in all; want the bad row of order/%s and its next row blocked behind it",
			n, s.parked(), bad.aggregate)
	}
	t.Logf("EF Core table with --aggregate-type-default order: %d rows in Kafka (%s), key the uuid, topic %s; the undecodable row and the one behind it parked",
		rep.Delivered, rep, f.Topic("order"))
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}

	// (c) A payload column of a type walrelay cannot read.
	s.exec("ALTER TABLE " + s.table.Quoted() + ` ALTER COLUMN "Payload" TYPE integer USING 0`)
	s.expectRefused(t, withDefault, `column "Payload" (payload) of `+s.table.String()+" has type integer",
		"fix: set --column-payload to a column of one of those types, or change the column's type")
	if n := s.parked(); n != 2 {
		t.Errorf("parked rows after the refusals: %d; want the 2 of before", n)
	}
}

const serialTableSQL = ` (id bigserial PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, aggregate_version bigint,
	type text NOT NULL, payload text, occurred_at timestamptz NOT NULL DEFAULT now())`

// A table with a bigserial id and JSON in a text payload column, as many
// hand-made outbox tables are: with --column-message-id id and
// --content-type application/json, rows of several transactions arrive
// with the id's digits as ce_id, the aggregate id as key (partition by
// murmur2), content-type application/json, the payload's bytes and order
// per aggregate. An undecodable row is parked under its bigint id, blocks
// its aggregate's next row, and `walrelay dlq discard --message-id` finds
// it by that id. An id column of a type that is no stable identifier
// (timestamptz) is refused at start.
func TestBigserialIDTextPayloadTable(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	s := newShape(t, "serial_", "events", serialTableSQL, "--column-message-id", "id")
	f := s.f
	run := []string{"--content-type", "application/json"}
	f.WalrelayOK("init", s.flags()...)
	_, report := runCheck(t, f, s.flags(run...)...)
	if report.Fail != 0 || report.status("dead-letter message ids") != "ok" {
		t.Errorf("check: %d failed, dead-letter message ids %s; want none failed, ids ok", report.Fail, report.status("dead-letter message ids"))
	}
	r := f.Run(s.flags(run...)...)
	r.WaitStarted()

	type row struct {
		id, aggregate, typ, payload string
		version                     int64
		at                          time.Time // occurred_at, the column's default
	}
	versions := map[string]int64{}
	next := func(agg, payload string) row {
		versions[agg]++
		return row{aggregate: agg, typ: "order.placed.v1", payload: payload, version: versions[agg]}
	}
	write := func(rows ...row) []row {
		t.Helper()
		err := pgx.BeginFunc(context.Background(), f.DB, func(tx pgx.Tx) error {
			for i := range rows {
				err := tx.QueryRow(context.Background(), "INSERT INTO "+s.table.Quoted()+
					" (aggregate_type, aggregate_id, aggregate_version, type, payload) VALUES ('order', $1, $2, $3, $4) RETURNING id::text, occurred_at",
					rows[i].aggregate, rows[i].version, rows[i].typ, rows[i].payload).Scan(&rows[i].id, &rows[i].at)
				if err != nil {
					return err
				}
			}
			return nil
		})
		testkit.Must(t, err, "write %d rows", len(rows))
		return rows
	}
	var delivered []harness.Row
	keep := func(rows ...row) {
		for _, r := range rows {
			delivered = append(delivered, harness.Row{ID: r.id, AggregateType: "order", AggregateID: r.aggregate,
				Version: &r.version, Type: r.typ, Payload: r.payload, OccurredAt: r.at, ContentType: "application/json"})
		}
	}
	aggs := []string{"order-1", "order-2", "order-3", "order-4"}
	for tx := range 4 {
		var rows []row
		for i, agg := range aggs {
			rows = append(rows, next(agg, fmt.Sprintf(`{"order":%d,"tx":%d}`, i, tx)), next(agg, fmt.Sprintf(`{"order":%d,"tx":%d,"again":true}`, i, tx)))
		}
		keep(write(rows...)...)
	}
	bad := next("order-3", `{"bad":true}`)
	bad.typ = ""
	bad = write(bad)[0]
	behind := write(next("order-3", `{"behind":true}`))[0]
	keep(write(next("order-1", `{"last":true}`))...)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)

	rep := f.Verify(delivered)
	harness.AssertClean(t, rep, 0)
	for _, r := range delivered {
		if _, err := strconv.ParseInt(r.ID, 10, 64); err != nil {
			t.Fatalf("ce_id %q is not the bigserial's digits", r.ID)
		}
	}
	dead := schema.Table{Schema: s.table.Schema, Name: s.table.Name + "_dead_letters"}.Quoted()
	n := s.count("SELECT count(*) FROM "+dead+" WHERE (message_id = $1 AND blocked_by IS NULL AND reason LIKE '%column \"type\": empty%')"+
		" OR (message_id = $2 AND blocked_by = $1 AND aggregate_id = 'order-3')", bad.id, behind.id)
	if n != 2 || s.parked() != 2 {
		t.Errorf("dead letters: %d of 2 as wanted, %d in all; want row %s parked and row %s blocked behind it", n, s.parked(), bad.id, behind.id)
	}
	out := f.WalrelayOK("dlq", "discard", "--message-id", bad.id, "--reason", "test: an empty type", "--table", s.table.String())
	if n := s.count("SELECT count(*) FROM "+dead+" WHERE message_id = $1 AND status = 'discarded'", bad.id); n != 1 {
		t.Errorf("after `walrelay dlq discard --message-id %s`: %d rows of that id discarded; want 1\n%s", bad.id, n, out)
	}
	t.Logf("bigserial ids, text payloads: %d records (%s), ce_id the id's digits, content-type application/json", rep.Delivered, rep)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}

	s.exec("ALTER TABLE " + s.table.Quoted() + " ADD COLUMN created timestamptz")
	s.cols = []string{"--column-message-id", "created"}
	s.expectRefused(t, nil, `column "created" (message_id) of `+s.table.String()+" has type timestamp with time zone; a message id column is uuid, bigint",
		"fix: set --column-message-id to a column of one of those types, or change the column's type")
}
