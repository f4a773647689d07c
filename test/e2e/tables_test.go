package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// multiTable is one outbox table of TestSeveralTablesThroughOneSlot: how a
// writer inserts a row into it and where its records go.
type multiTable struct {
	name   string // as --table takes it
	topic  string // the topic of its rows (one aggregate type per table)
	insert string // INSERT of ($1 id, $2 aggregate id, $3 payload)
}

// Three outbox tables of different shapes (walrelay's own, EF Core's,
// Debezium's) in two schemas, through one config file, one slot and one
// publication: writers commit rows into one table or several in one
// transaction, interleaved, while the relay is killed (-9) and restarted.
// Every row arrives on its table's topic with its table's headers, each
// (table, aggregate) in commit order, and walrelay made one slot.
func TestSeveralTablesThroughOneSlot(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	ctx := context.Background()
	billing := "billing_" + f.ID
	t.Cleanup(func() { f.DB.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+billing+`" CASCADE`) }) //nolint:errcheck // best effort
	ownerExec(t, f, fmt.Sprintf(`CREATE SCHEMA "%[1]s";
		CREATE TABLE "%[1]s"."OutboxMessages" ("Id" uuid PRIMARY KEY, "AggregateId" text NOT NULL, "Type" text NOT NULL,
			"Payload" text NOT NULL, "OccurredAtUtc" timestamptz NOT NULL DEFAULT now());
		CREATE TABLE "%[1]s".outboxevent (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
			type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now(), tracingspancontext varchar(256))`, billing))
	tables := []multiTable{
		{name: "public." + f.Table, topic: f.Topic("order"),
			insert: `INSERT INTO "` + f.Table + `" (message_id, aggregate_type, aggregate_id, type, payload) VALUES ($1, 'order', $2, 'order.placed.v1', $3::jsonb)`},
		{name: billing + ".OutboxMessages", topic: f.TopicPrefix + ".billing.invoice",
			insert: `INSERT INTO "` + billing + `"."OutboxMessages" ("Id", "AggregateId", "Type", "Payload") VALUES ($1, $2, 'invoice.issued.v1', $3)`},
		{name: billing + ".outboxevent", topic: f.TopicPrefix + ".dbz.customer",
			insert: `INSERT INTO "` + billing + `".outboxevent (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'customer', $2, 'customer.created.v1', $3::jsonb)`},
	}
	f.CreateTopics(tables[1].topic, tables[2].topic)
	config := filepath.Join(t.TempDir(), "walrelay.yaml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`# three tables, one slot
postgres-url: %s
kafka-brokers: %s
slot: %s
publication: %s
status-interval: 1s
tables:
  - table: %s
    topic-template: %s.{aggregate_type}
  - table: %s
    column-message-id: Id
    column-aggregate-id: AggregateId
    column-type: Type
    column-payload: Payload
    column-occurred-at: OccurredAtUtc
    aggregate-type-default: invoice
    content-type: application/json
    topic-template: %s.billing.{aggregate_type}
    ce-source: billing
  - table: %s
    preset: debezium
    topic-template: %s.dbz.{aggregate_type}
`, f.PGURL, f.Brokers, f.Slot, f.Publication, tables[0].name, f.TopicPrefix, tables[1].name, f.TopicPrefix, tables[2].name, f.TopicPrefix)), 0o600)
	testkit.Must(t, err, "write the config file")
	// The file says it all: none of the fixture's variables.
	f.Unsetenv("WALRELAY_POSTGRES_URL", "WALRELAY_KAFKA_BROKERS", "WALRELAY_TABLE", "WALRELAY_PUBLICATION", "WALRELAY_SLOT", "WALRELAY_TOPIC_TEMPLATE")

	// init adds the two new tables to the fixture's publication, and
	// makes their dead-letter tables; check then passes.
	out := f.WalrelayOK("init", "--config", config)
	if !strings.Contains(out, "covers public."+f.Table+", "+billing+".OutboxMessages, "+billing+".outboxevent") {
		t.Errorf("init said %q; want the publication covering the three tables", out)
	}
	stdout, stderr, code := f.Walrelay("check", "--config", config, "--json")
	report := parseCheck(t, stdout)
	if code != 0 || report.Fail != 0 {
		t.Fatalf("check: exit %d, %d failed\n%s%s", code, report.Fail, stdout, stderr)
	}
	for _, tb := range tables {
		for _, name := range []string{"outbox table ", "table columns ", "publication table "} {
			if s := report.status(name + tb.name); s != "ok" {
				t.Errorf("check: %s%s: %q; want ok", name, tb.name, s)
			}
		}
	}

	// Writers: each transaction writes one to three rows, into one table
	// or several; each (table, aggregate) counts its rows in its payloads.
	type key struct{ table, agg string }
	var mu sync.Mutex
	next := map[key]int{}
	want := map[string]key{} // message id -> its (table, aggregate)
	write := func(ctx context.Context, w int) error {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		for ctx.Err() == nil {
			err := pgx.BeginFunc(ctx, f.DB, func(tx pgx.Tx) error {
				for range 1 + rng.IntN(3) {
					ti := rng.IntN(len(tables))
					k := key{tables[ti].name, fmt.Sprintf("w%d-a%d", w, rng.IntN(4))}
					mu.Lock()
					next[k]++
					n := next[k]
					mu.Unlock()
					id := harness.NewUUID()
					if _, err := tx.Exec(ctx, tables[ti].insert, id, k.agg, fmt.Sprintf(`{"n": %d}`, n)); err != nil {
						return err
					}
					mu.Lock()
					want[id] = k
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				// A transaction cut by the end of the load is not counted:
				// its rows were never committed.
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}
	// Rows rolled back by the cut are in want but not committed: read the
	// committed ids back from the tables at the end instead.
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 3 {
		wg.Go(func() { errs <- write(load, w) })
	}
	r := f.Run("--config", config)
	metrics := testkit.FreePort(t)
	for kill := range 3 {
		time.Sleep(time.Duration(700+300*kill) * time.Millisecond)
		r.Kill()
		r = f.Run("--config", config, "--metrics-addr", metrics)
	}
	time.Sleep(time.Second)
	stopLoad()
	wg.Wait()
	close(errs)
	for err := range errs {
		testkit.Must(t, err, "write")
	}
	f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	r.Running()

	committed := map[string]bool{}
	for _, q := range []string{
		`SELECT message_id::text FROM "` + f.Table + `"`,
		`SELECT "Id"::text FROM "` + billing + `"."OutboxMessages"`,
		`SELECT id::text FROM "` + billing + `".outboxevent`,
	} {
		rows, err := f.DB.Query(ctx, q)
		testkit.Must(t, err, "read ids")
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		testkit.Must(t, err, "read ids")
		for _, id := range ids {
			committed[id] = true
		}
	}
	// Every committed row arrived on its table's topic, with its table's
	// headers, each (table, aggregate) in order; duplicates only after a
	// kill, never out of order.
	seen := map[string]bool{}
	duplicates, records := 0, 0
	for ti, tb := range tables {
		last := map[string]int{}
		for _, rec := range f.ReadTopic(tb.topic) {
			records++
			id := rec.Headers["ce_id"]
			k, ok := want[id]
			if !ok || k.table != tb.name || !committed[id] {
				t.Errorf("record %s on %s: of %+v (committed %v); want a committed row of %s", id, tb.topic, k, committed[id], tb.name)
				continue
			}
			var p struct{ N int }
			testkit.Must(t, json.Unmarshal([]byte(*rec.Payload), &p), "payload of %s", id)
			switch {
			case seen[id]:
				duplicates++
			case p.N != last[k.agg]+1:
				t.Errorf("%s aggregate %s: record n=%d after n=%d; want n=%d (commit order)", tb.name, k.agg, p.N, last[k.agg], last[k.agg]+1)
			}
			seen[id] = true
			last[k.agg] = max(last[k.agg], p.N)
			if src := rec.Headers["ce_source"]; (ti == 1) != (src == "billing") {
				t.Errorf("record %s of %s: ce_source %q; want billing only for the EF Core table's", id, tb.name, src)
			}
			if _, dbz := rec.Headers["id"]; (ti == 2) != dbz {
				t.Errorf("record %s of %s: id header present %v; want it on the Debezium table's only", id, tb.name, dbz)
			}
		}
	}
	lost := 0
	for id := range committed {
		if !seen[id] {
			lost++
		}
	}
	t.Logf("three tables, one slot, 3 kills: committed %d rows, records %d, lost %d, duplicates %d", len(committed), records, lost, duplicates)
	if lost != 0 || len(committed) < 100 {
		t.Errorf("lost %d of %d committed rows; want none lost of at least 100", lost, len(committed))
	}
	// The last relay counted each table's rows under its name.
	for _, tb := range tables {
		series := `walrelay_table_rows_total{table="` + tb.name + `"}`
		if v := harness.Scrape(metrics, series); v <= 0 {
			t.Errorf("%s: %v; want the rows the last relay read of the table", series, v)
		}
	}
	var slots int
	testkit.Must(t, f.DB.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1`, "%"+f.ID+"%").Scan(&slots), "count slots")
	if slots != 1 {
		t.Errorf("slots of this test: %d; want one", slots)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d; want 0", code)
	}
}

// Several tables that do not fit are refused at start with the table, what
// to change and where its entry is in the file, nothing created or
// confirmed: a mapped column the table lacks (init), a table the
// publication lacks (run, which never changes the publication).
func TestSeveralTablesRefusedWithTheEntry(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	ctx := context.Background()
	second := f.Table + "_second"
	f.PG.DropTable(`"`+second+`"`, `"`+second+`_dead_letters"`)
	ownerExec(t, f, `CREATE TABLE "`+second+`" (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		type text NOT NULL, payload jsonb NOT NULL); GRANT SELECT ON "`+second+`" TO `+harness.RelayRole)
	write := func(payloadColumn string) string {
		p := filepath.Join(t.TempDir(), "walrelay.yaml")
		testkit.Must(t, os.WriteFile(p, []byte(fmt.Sprintf(`slot: %s
publication: %s
tables:
  - table: public.%s
  - table: public.%s
    column-message-id: id
    column-payload: %s
`, f.Slot, f.Publication, f.Table, second, payloadColumn)), 0o600), "write the config file")
		return p
	}
	f.Unsetenv("WALRELAY_TABLE", "WALRELAY_TOPIC_TEMPLATE", "WALRELAY_SLOT", "WALRELAY_PUBLICATION")
	pubTables := func() string {
		var s string
		testkit.Must(t, f.DB.QueryRow(ctx, `SELECT coalesce(string_agg(tablename, ',' ORDER BY tablename), '') FROM pg_publication_tables WHERE pubname = $1`, f.Publication).Scan(&s), "read the publication")
		return s
	}
	before := pubTables()

	bad := write("Body")
	_, stderr, code := f.Walrelay("init", "--config", bad, "--postgres-url", f.PGURL)
	want := `table columns public.` + second + `: column "Body" (payload) is missing from public.` + second
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "its entry is "+bad+":5") {
		t.Errorf("init with a column the second table lacks: exit %d, stderr %q; want exit 1, %q and the entry's line", code, stderr, want)
	}
	var slots int
	testkit.Must(t, f.DB.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, f.Slot).Scan(&slots), "count slots")
	if slots != 0 || pubTables() != before {
		t.Errorf("after the refused init: %d slots, publication of %q; want none made and the publication as it was (%q)", slots, pubTables(), before)
	}

	// The first table's init (the fixture's) makes the slot; run with the
	// second table, which the publication lacks, refuses and confirms
	// nothing.
	f.WalrelayOK("init", "--table", "public."+f.Table, "--slot", f.Slot, "--publication", f.Publication)
	confirmed := f.ConfirmedLSN()
	good := write("payload")
	_, stderr, code = f.Walrelay("run", "--config", good)
	want = `publication "` + f.Publication + `" does not include table public.` + second
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, `ALTER PUBLICATION "`+f.Publication+`" ADD TABLE "public"."`+second+`"`) ||
		!strings.Contains(stderr, "its entry is "+good+":5") {
		t.Errorf("run with a table the publication lacks: exit %d, stderr %q; want exit 1, %q, the ALTER PUBLICATION and the entry's line", code, stderr, want)
	}
	if got := f.ConfirmedLSN(); got != confirmed || pubTables() != before {
		t.Errorf("after the refused run: confirmed %s (was %s), publication of %q; want nothing confirmed or changed", got, confirmed, pubTables())
	}
}

// Adding a table later: walrelay relays one table; rows go into a second
// one meanwhile; walrelay stops, the second table's entry is added and
// init adds it to the publication; the relay started again relays both
// tables' new rows, and replay --table publishes what the second held
// before. Every row of both tables is then in Kafka.
func TestAddingATableLater(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	second := f.Table + "_later"
	f.PG.DropTable(`"`+second+`"`, `"`+second+`_dead_letters"`)
	ownerExec(t, f, `CREATE TABLE "`+second+`" (message_id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		type text NOT NULL, payload jsonb NOT NULL, occurred_at timestamptz NOT NULL DEFAULT now())`)
	laterTopic := f.TopicPrefix + ".later.order"
	f.CreateTopics(laterTopic)
	write := func(tables ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "postgres-url: %s\nslot: %s\npublication: %s\ntables:\n  - table: public.%s\n    topic-template: %s.{aggregate_type}\n",
			f.PGURL, f.Slot, f.Publication, f.Table, f.TopicPrefix)
		for _, tb := range tables {
			fmt.Fprintf(&b, "  - table: public.%s\n    topic-template: %s.later.{aggregate_type}\n", tb, f.TopicPrefix)
		}
		p := filepath.Join(t.TempDir(), "walrelay.yaml")
		testkit.Must(t, os.WriteFile(p, []byte(b.String()), 0o600), "write the config file")
		return p
	}
	f.Unsetenv("WALRELAY_POSTGRES_URL", "WALRELAY_TABLE", "WALRELAY_TOPIC_TEMPLATE", "WALRELAY_SLOT", "WALRELAY_PUBLICATION")
	insert := func(table string, n int) []string { return insertOrders(t, f, table, n) }

	one := write()
	f.WalrelayOK("init", "--config", one)
	r := f.Run("--config", one)
	first := insert(f.Table, 20)
	before := insert(second, 15) // not relayed: not in the file, nor in the publication
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d; want 0", code)
	}

	two := write(second)
	if out := f.WalrelayOK("init", "--config", two); !strings.Contains(out, "covers public."+f.Table+", public."+second) {
		t.Errorf("init with the second table: %q; want the publication covering both", out)
	}
	r = f.Run("--config", two)
	first = append(first, insert(f.Table, 10)...)
	after := insert(second, 10)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	out := f.WalrelayOK("replay", "--config", two, "--table", "public."+second, "--kafka-brokers", f.Brokers)
	t.Logf("walrelay replay of the second table: %s", strings.TrimSpace(out))

	ids := func(topic string) map[string]int {
		n := map[string]int{}
		for _, rec := range f.ReadTopic(topic) {
			n[rec.Headers["ce_id"]]++
		}
		return n
	}
	own, later := ids(f.Topic("order")), ids(laterTopic)
	for _, id := range first {
		if own[id] != 1 {
			t.Errorf("first table's row %s: %d records; want 1", id, own[id])
		}
	}
	for _, id := range before {
		if later[id] != 1 {
			t.Errorf("second table's row from before it was added %s: %d records; want 1 (replayed)", id, later[id])
		}
	}
	for _, id := range after {
		if later[id] < 1 {
			t.Errorf("second table's row from after it was added %s: not in Kafka", id)
		}
	}

	// Removing the second table's entry stops relaying it, and only it.
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d; want 0", code)
	}
	r = f.Run("--config", one)
	kept, dropped := insert(f.Table, 5), insert(second, 5)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	own, later = ids(f.Topic("order")), ids(laterTopic)
	for _, id := range kept {
		if own[id] != 1 {
			t.Errorf("first table's row after the second was removed %s: %d records; want 1", id, own[id])
		}
	}
	for _, id := range dropped {
		if later[id] != 0 {
			t.Errorf("second table's row after its entry was removed %s: %d records; want none", id, later[id])
		}
	}
	r.Running()
}

// A lost slot of several tables: walrelay recover replaces it for all of
// them and publishes every table's rows of the gap from the tables, each
// to its table's topic; run then streams both tables from the new slot.
func TestRecoverASlotOfSeveralTables(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	second := f.Table + "_two"
	f.PG.DropTable(`"`+second+`"`, `"`+second+`_dead_letters"`)
	ownerExec(t, f, `CREATE TABLE "`+second+`" (message_id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		type text NOT NULL, payload jsonb NOT NULL, occurred_at timestamptz NOT NULL DEFAULT now())`)
	twoTopic := f.TopicPrefix + ".two.order"
	f.CreateTopics(twoTopic)
	config := filepath.Join(t.TempDir(), "walrelay.yaml")
	testkit.Must(t, os.WriteFile(config, []byte(fmt.Sprintf(`postgres-url: %s
slot: %s
publication: %s
tables:
  - table: public.%s
    topic-template: %s.{aggregate_type}
  - table: public.%s
    topic-template: %s.two.{aggregate_type}
`, f.PGURL, f.Slot, f.Publication, f.Table, f.TopicPrefix, second, f.TopicPrefix)), 0o600), "write the config file")
	f.Unsetenv("WALRELAY_POSTGRES_URL", "WALRELAY_TABLE", "WALRELAY_TOPIC_TEMPLATE", "WALRELAY_SLOT", "WALRELAY_PUBLICATION")
	insert := func(table string, n int) []string { return insertOrders(t, f, table, n) }

	f.WalrelayOK("init", "--config", config)
	r := f.Run("--config", config)
	one, two := insert(f.Table, 10), insert(second, 10)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d; want 0", code)
	}
	// The gap: rows written while the slot is gone.
	since := time.Now().UTC()
	ownerExec(t, f, fmt.Sprintf(`SELECT pg_drop_replication_slot('%s')`, f.Slot))
	one, two = append(one, insert(f.Table, 15)...), append(two, insert(second, 12)...)

	summary := f.WalrelayOK("recover", "--config", config, "--since", since.Format(time.RFC3339Nano))
	t.Logf("walrelay recover: %s", strings.TrimSpace(summary))
	if !strings.Contains(summary, "of 2 tables, 47 rows") {
		t.Errorf("recover said %q; want both tables' 47 rows read (the margin takes the rows from before the gap too)", summary)
	}
	r = f.Run("--config", config)
	one, two = append(one, insert(f.Table, 5)...), append(two, insert(second, 5)...)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	r.Running()

	for _, c := range []struct {
		topic string
		ids   []string
	}{{f.Topic("order"), one}, {twoTopic, two}} {
		got := map[string]int{}
		for _, rec := range f.ReadTopic(c.topic) {
			got[rec.Headers["ce_id"]]++
		}
		for _, id := range c.ids {
			if got[id] < 1 {
				t.Errorf("%s: row %s not in Kafka after the recovery", c.topic, id)
			}
		}
	}
}

// insertOrders commits n rows of walrelay's own shape into table of the
// public schema, one transaction each, over three aggregates, and returns
// their ids.
func insertOrders(t *testing.T, f *harness.Fixture, table string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := harness.NewUUID()
		_, err := f.DB.Exec(context.Background(), `INSERT INTO "`+table+`" (message_id, aggregate_type, aggregate_id, type, payload) VALUES ($1, 'order', $2, 'order.placed.v1', '{}')`,
			id, fmt.Sprintf("a%d", i%3))
		testkit.Must(t, err, "insert into %s", table)
		ids = append(ids, id)
	}
	return ids
}
