package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// debeziumTableSQL is the outbox table of Debezium's Outbox Event Router
// as its documentation shows it, with the optional timestamp and
// tracingspancontext columns.
const debeziumTableSQL = ` (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
	type varchar(255) NOT NULL, payload jsonb, "timestamp" timestamptz NOT NULL, tracingspancontext varchar(256))`

// debeziumRow is one row of Debezium's table; span nil is a NULL
// tracingspancontext, payload nil a NULL payload.
type debeziumRow struct {
	id             schema.MessageID
	aggType, aggID string
	typ            string
	payload, span  *string
	at             time.Time
	wantTrace      string // the traceparent the record must carry; "" for none
	wantState      string // its tracestate; "" for none
	wantValue      string // payload::text, read back after the insert
}

func strptr(s string) *string { return &s }

// Debezium's table with --preset debezium and no other flag but the
// table, the publication and the connection: rows of several
// transactions reach outbox.event.<aggregatetype> keyed by aggregateid,
// in the partition Java's murmur2 gives, with an id header beside ce_id,
// traceparent (and tracestate) exactly for the rows whose
// tracingspancontext holds a valid one, a tombstone for the NULL payload,
// the payload's bytes and order per aggregate; every record a CloudEvent.
// The preset against walrelay's own table fails check, naming the id
// column and its flag.
func TestDebeziumPreset(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t)
	f.Unsetenv("WALRELAY_TOPIC_TEMPLATE") // the preset's template, not the fixture's
	table := schema.Table{Schema: "public", Name: "outboxevent_" + f.ID}
	pub := "pub_deb_" + f.ID
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		_, err := f.DB.Exec(ctx, sql)
		testkit.Must(t, err, "%s", strings.SplitN(sql, "\n", 2)[0])
	}
	t.Cleanup(func() {
		f.DB.Exec(ctx, "DROP PUBLICATION IF EXISTS "+schema.QuoteIdentifier(pub)) //nolint:errcheck // best effort
		for _, n := range []string{table.Name, table.Name + "_dead_letters", table.Name + "_recoveries", table.Name + "_topics"} {
			f.DB.Exec(ctx, "DROP TABLE IF EXISTS "+schema.Table{Schema: "public", Name: n}.Quoted()) //nolint:errcheck // best effort
		}
	})
	exec("CREATE TABLE " + table.Quoted() + debeziumTableSQL)
	flags := []string{"--preset", "debezium", "--table", table.String(), "--publication", pub}
	testkit.Must(t, harness.ExecGrants(ctx, f.DB, f.WalrelayOK("schema", append(flags, "--grant-to", harness.RelayRole)...)), "apply `walrelay schema` DDL")
	orders, customers := "order_"+f.ID, "customer_"+f.ID
	topics := []string{"outbox.event." + orders, "outbox.event." + customers}
	kafkatest.CreateTopics(t, f.Brokers, 3, topics...)

	f.WalrelayOK("init", flags...)
	_, report := runCheck(t, f, flags...)
	if report.Fail != 0 || report.status("preset") != "ok" {
		t.Errorf("check --preset debezium: %d failed, preset %q; want none failed and the preset said", report.Fail, report.status("preset"))
	}
	r := f.Run(flags...)
	r.WaitStarted()

	rows := writeDebeziumRows(t, f, table, orders, customers)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	checkDebeziumRecords(t, f, rows, topics)
	if n := strings.Count(r.Stderr.String(), "trace header of the span context column dropped"); n == 0 {
		t.Error("no warning about the unreadable span contexts; want one")
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}
	var parked int
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT count(*) FROM "+schema.Table{Schema: "public", Name: table.Name + "_dead_letters"}.Quoted()).Scan(&parked), "count dead letters")
	if parked != 0 {
		t.Errorf("parked rows: %d; want none (a NULL payload is a tombstone, a bad span context no reason to park)", parked)
	}

	// The preset against walrelay's own table: its message id column is
	// message_id, not id.
	_, report = runCheck(t, f, "--preset", "debezium")
	want := []string{`column "id" (message_id) is missing from public.` + f.Table, "fix: set --column-message-id to the column that holds the message id"}
	for _, c := range report.Checks {
		if c.Name == "table columns" && (c.Status != "fail" || !containsAll(c.Found+"; fix: "+c.Fix, want)) {
			t.Errorf("check table columns: %s %q; want fail saying %q", c.Status, c.Found+"; fix: "+c.Fix, want)
		}
	}
	if report.status("table columns") != "fail" {
		t.Errorf("check --preset debezium on walrelay's table: table columns %q; want fail", report.status("table columns"))
	}
}

// writeDebeziumRows writes rows of two aggregate types and three
// aggregates in several transactions: span contexts valid (with and
// without tracestate), invalid, unreadable and NULL; one NULL payload.
func writeDebeziumRows(t *testing.T, f *harness.Fixture, table schema.Table, orders, customers string) []*debeziumRow {
	t.Helper()
	const (
		trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	)
	spans := []struct {
		text         *string
		trace, state string
	}{
		{strptr("#Fri Dec 04 09:00:00 UTC 2026\ntraceparent=" + trace + "\n"), trace, ""},
		{strptr("#Fri Dec 04 09:00:00 UTC 2026\ntracestate=" + state + "\ntraceparent: " + trace + "\n"), trace, state},
		{nil, "", ""},
		{strptr("#Fri Dec 04 09:00:00 UTC 2026\ntraceparent=00-00000000000000000000000000000000-b7ad6b7169203331-01\n"), "", ""},
		{strptr("traceparent=\\u00zz"), "", ""},
		{strptr("not a span context"), "", ""},
	}
	aggs := []struct{ typ, id string }{{orders, "o-1"}, {orders, "o-2"}, {customers, "c-1"}}
	base := time.Now().UTC().Truncate(time.Microsecond)
	var all []*debeziumRow
	n := 0
	for tx := range 4 {
		var rows []*debeziumRow
		for _, a := range aggs {
			for range 2 {
				s := spans[n%len(spans)]
				row := &debeziumRow{id: outbox.NewID(), aggType: a.typ, aggID: a.id, typ: a.typ + ".changed",
					payload: strptr(fmt.Sprintf(`{"n": %d, "tx": %d, "text": "ü \"q\""}`, n, tx)), span: s.text,
					at: base.Add(time.Duration(n) * time.Millisecond), wantTrace: s.trace, wantState: s.state}
				rows = append(rows, row)
				n++
			}
		}
		if tx == 2 {
			rows[1].payload = nil // a tombstone for o-1
		}
		insertDebeziumRows(t, f, table, rows)
		all = append(all, rows...)
	}
	values := map[string]string{}
	dbRows, err := f.DB.Query(context.Background(), "SELECT id::text, payload::text FROM "+table.Quoted()+" WHERE payload IS NOT NULL")
	testkit.Must(t, err, "read payloads")
	for dbRows.Next() {
		var id, v string
		testkit.Must(t, dbRows.Scan(&id, &v), "scan payload")
		values[id] = v
	}
	testkit.Must(t, dbRows.Err(), "read payloads")
	for _, r := range all {
		r.wantValue = values[r.id.String()]
	}
	return all
}

func insertDebeziumRows(t *testing.T, f *harness.Fixture, table schema.Table, rows []*debeziumRow) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), f.DB, func(tx pgx.Tx) error {
		for _, r := range rows {
			_, err := tx.Exec(context.Background(), "INSERT INTO "+table.Quoted()+
				` (id, aggregatetype, aggregateid, type, payload, "timestamp", tracingspancontext) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)`,
				r.id.String(), r.aggType, r.aggID, r.typ, r.payload, r.at, r.span)
			if err != nil {
				return err
			}
		}
		return nil
	})
	testkit.Must(t, err, "write %d rows", len(rows))
}

// checkDebeziumRecords reads the topics with kcat (every record checked as
// a CloudEvent by ReadTopic) and compares each record with its row.
func checkDebeziumRecords(t *testing.T, f *harness.Fixture, rows []*debeziumRow, topics []string) {
	t.Helper()
	byID := map[string]*debeziumRow{}
	var wantOrder = map[string][]string{} // aggregate: ids in commit order
	for _, r := range rows {
		byID[r.id.String()] = r
		wantOrder[r.aggType+"/"+r.aggID] = append(wantOrder[r.aggType+"/"+r.aggID], r.id.String())
	}
	gotOrder := map[string][]string{}
	seen := 0
	for _, topic := range topics {
		partitionFor := f.JavaPartitioner(topic)
		for _, rec := range f.ReadTopic(topic) {
			id := rec.Headers["ce_id"]
			r, ok := byID[id]
			if !ok {
				t.Errorf("%s/%d@%d: ce_id %q is no row's", topic, rec.Partition, rec.Offset, id)
				continue
			}
			seen++
			gotOrder[r.aggType+"/"+r.aggID] = append(gotOrder[r.aggType+"/"+r.aggID], id)
			if problem := debeziumRecordProblem(r, rec, topic, partitionFor(r.aggID)); problem != "" {
				t.Errorf("row %s (%s/%s): %s", id, r.aggType, r.aggID, problem)
			}
		}
	}
	if seen != len(rows) {
		t.Errorf("%d records; want %d, one per row", seen, len(rows))
	}
	for agg, want := range wantOrder {
		if fmt.Sprint(gotOrder[agg]) != fmt.Sprint(want) {
			t.Errorf("aggregate %s: records in order %v; want %v", agg, gotOrder[agg], want)
		}
	}
	t.Logf("%d records in %v; each with its id header, traceparent only where the span context held a valid one", seen, topics)
}

// debeziumRecordProblem says how rec differs from what Debezium's
// consumers expect of r, partition being the Java partitioner's for its
// key; "" when it does not. Records are read in offset
// order per partition, so the order check is per aggregate's partition.
func debeziumRecordProblem(r *debeziumRow, rec kafkatest.Record, topic string, partition int32) string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if want := "outbox.event." + r.aggType; topic != want {
		add("topic %s; want %s", topic, want)
	}
	if rec.Key == nil || *rec.Key != r.aggID {
		add("key %v; want %q", rec.Key, r.aggID)
	}
	if rec.Partition != partition {
		add("partition %d; want %d (murmur2 of the key, as Java's default partitioner)", rec.Partition, partition)
	}
	switch {
	case r.payload == nil && rec.Payload != nil:
		add("value %q; want null (a tombstone)", *rec.Payload)
	case r.payload != nil && (rec.Payload == nil || *rec.Payload != r.wantValue):
		add("value %v; want %q", rec.Payload, r.wantValue)
	}
	want := map[string]string{"id": r.id.String(), "ce_id": r.id.String(), "ce_type": r.typ, "ce_subject": r.aggID,
		"aggregate_type": r.aggType, "ce_time": r.at.Format(time.RFC3339Nano)}
	if r.payload != nil {
		want["content-type"] = "application/json"
	}
	if r.wantTrace != "" {
		want["traceparent"] = r.wantTrace
	}
	if r.wantState != "" {
		want["tracestate"] = r.wantState
	}
	for k, v := range want {
		if got, ok := rec.Headers[k]; !ok || got != v {
			add("header %s = %q; want %q", k, got, v)
		}
	}
	for _, k := range []string{"traceparent", "tracestate", "content-type"} {
		if _, ok := want[k]; !ok {
			if got, has := rec.Headers[k]; has {
				add("header %s = %q; want none", k, got)
			}
		}
	}
	return strings.Join(problems, "; ")
}
