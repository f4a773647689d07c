//go:build bench

package drain

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// The tables benchmark (issue 36, DECISIONS.md 46): single-row transactions
// spread evenly over three outbox tables, at scale 1, and their payload.
const (
	tablesRows    = 60_000
	tablesPayload = 200
)

// benchTable is one of the three outbox tables: its name as a config
// file's `table` takes it, its other settings there, the aggregate type of
// its rows (the last part of their topic) and how the load inserts a row.
type benchTable struct {
	name     string
	settings []string // "key: value", beside table and topic-template
	aggType  string
	insert   func(w *strings.Builder, r row)
}

// benchTables are walrelay's own shape in public, EF Core's and Debezium's
// in schema, as in test/e2e/tables_test.go.
func benchTables(own, schema string) []benchTable {
	ef, dbz := schema+`."OutboxMessages"`, schema+".outboxevent"
	return []benchTable{
		{name: "public." + own, aggType: "bench", insert: func(w *strings.Builder, r row) { insertRow("public."+own)(w, 0, r) }},
		{name: schema + ".OutboxMessages", aggType: "invoice",
			settings: []string{"column-message-id: Id", "column-aggregate-id: AggregateId", "column-type: Type",
				"column-payload: Payload", "column-occurred-at: OccurredAtUtc", "aggregate-type-default: invoice",
				"content-type: application/json", "ce-source: billing"},
			insert: func(w *strings.Builder, r row) {
				fmt.Fprintf(w, `INSERT INTO %s ("Id","AggregateId","Type","Payload") VALUES ('%s','%s','invoice.issued.v1','%s')`,
					ef, uuidString(r.id), r.aggregateID, r.payload)
			}},
		{name: dbz, aggType: "customer", settings: []string{"preset: debezium"},
			insert: func(w *strings.Builder, r row) {
				fmt.Fprintf(w, `INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) VALUES ('%s','customer','%s','customer.created.v1','%s')`,
					dbz, uuidString(r.id), r.aggregateID, r.payload)
			}},
	}
}

// tablesBacklog is the benchmark's WAL: the three tables, a publication of
// all three for the one relay and one of each table for the three (what a
// user running three relays has), and, for every round, a config file and a
// slot for the one relay and for each of the three, all made by `walrelay
// init` before the load, so that every slot reads the same WAL. All is
// removed in t.Cleanup.
type tablesBacklog struct {
	*backlog // its table is the first table, its publication the three's
	tables   []benchTable
	pubs     []string // one per table
	dir      string   // the config files
	perTable []int64  // rows loaded into each table
}

// tablesSide is one side of a round: the one relay of all three tables,
// the three relays of one table each at once, or, for reference, the same
// three one after another: alone on the machine, each walsender and relay
// shows what one slot of one table costs without the others beside it.
type tablesSide int

const (
	sideOne tablesSide = iota
	sideThree
	sideApart
	sideCount
)

func (s tablesSide) String() string { return [...]string{"one", "three", "apart"}[s] }

func newTablesBacklog(ctx context.Context, t *testing.T, pgURL, brokers string, rounds int) *tablesBacklog {
	t.Helper()
	pg := pgtest.Connect(t, pgURL, "")
	id := pg.Name
	own, schema := "tables_"+id, "tables_"+id+"_billing"
	tb := &tablesBacklog{
		backlog: &backlog{pgURL: pgURL, brokers: brokers, db: pg.Pool, id: id, table: own, publication: "tables_pub_" + id},
		tables:  benchTables(own, schema),
		dir:     t.TempDir(),
	}
	for i := range tb.tables {
		tb.pubs = append(tb.pubs, fmt.Sprintf("tables_pub_%s_%d", id, i))
	}
	for round := range rounds {
		tb.slots = append(tb.slots, tb.slot(round, sideOne, 0))
		for _, side := range []tablesSide{sideThree, sideApart} {
			for i := range tb.tables {
				tb.slots = append(tb.slots, tb.slot(round, side, i))
			}
		}
	}
	for _, s := range tb.slots {
		pg.DropSlot(s)
	}
	for _, p := range append([]string{tb.publication}, tb.pubs...) {
		pg.DropPublication(p)
	}
	pg.DropTable(own, own+"_dead_letters", own+"_recoveries", own+"_topics")
	t.Cleanup(func() { pg.Pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") }) //nolint:errcheck // best effort
	tb.createTables(ctx, t, schema)
	for round := range rounds {
		tb.initRound(ctx, t, round)
	}
	tb.start = tb.lsn(ctx, t, "pg_current_wal_insert_lsn()")
	return tb
}

// createTables makes the first table (and its publication of one) from
// `walrelay schema`, as users get it, and the other two by hand.
func (tb *tablesBacklog) createTables(ctx context.Context, t *testing.T, schema string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, walrelayBin, "schema", "--table", tb.tables[0].name, "--publication", tb.pubs[0]).Output()
	if err != nil {
		t.Fatalf("walrelay schema: %v", err)
	}
	_, err = tb.db.Exec(ctx, string(out)+fmt.Sprintf(`;
		CREATE SCHEMA %[1]s;
		CREATE TABLE %[1]s."OutboxMessages" ("Id" uuid PRIMARY KEY, "AggregateId" text NOT NULL, "Type" text NOT NULL,
			"Payload" text NOT NULL, "OccurredAtUtc" timestamptz NOT NULL DEFAULT now());
		CREATE TABLE %[1]s.outboxevent (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
			type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now(), tracingspancontext varchar(256))`, schema))
	testkit.Must(t, err, "create the three outbox tables")
}

// initRound writes the config files of a round, runs `walrelay init` on
// each (the publications it lacks, the dead-letter tables, the slot) and
// creates the round's topics, empty, so that their records can be counted.
func (tb *tablesBacklog) initRound(ctx context.Context, t *testing.T, round int) {
	t.Helper()
	all := make([]int, len(tb.tables))
	for i := range all {
		all[i] = i
	}
	paths := []string{tb.writeConfig(t, round, sideOne, 0, tb.publication, all...)}
	for _, side := range []tablesSide{sideThree, sideApart} {
		for i := range tb.tables {
			paths = append(paths, tb.writeConfig(t, round, side, i, tb.pubs[i], i))
		}
	}
	for _, p := range paths {
		if out, err := exec.CommandContext(ctx, walrelayBin, "init", "--config", p).CombinedOutput(); err != nil {
			t.Fatalf("walrelay init --config %s: %v\n%s", p, err, out)
		}
	}
	var topics []string
	for side := range sideCount {
		for i := range tb.tables {
			topics = append(topics, tb.topic(round, side, i))
		}
	}
	kafkatest.CreateTopics(t, tb.brokers, partitions, topics...)
}

// slot is the slot of a round's side; for the three, of table i's relay.
func (tb *tablesBacklog) slot(round int, side tablesSide, i int) string {
	if side == sideOne {
		return fmt.Sprintf("tables_%s_%d_one", tb.id, round)
	}
	return fmt.Sprintf("tables_%s_%d_%s_t%d", tb.id, round, side, i)
}

// topicBase is where a round's side publishes table i's rows: each run to
// topics of its own, so that each run's records can be counted.
func (tb *tablesBacklog) topicBase(round int, side tablesSide, i int) string {
	return fmt.Sprintf("tables_%s_%d_%s_t%d", tb.id, round, side, i)
}

func (tb *tablesBacklog) topic(round int, side tablesSide, i int) string {
	return tb.topicBase(round, side, i) + "." + tb.tables[i].aggType
}

func (tb *tablesBacklog) configPath(round int, side tablesSide, i int) string {
	return filepath.Join(tb.dir, tb.slot(round, side, i)+".yaml")
}

// writeConfig writes the config file of a round's side for the tables: one
// table's settings at the top, several as a tables: list.
func (tb *tablesBacklog) writeConfig(t *testing.T, round int, side tablesSide, i int, publication string, tables ...int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "postgres-url: %s\nkafka-brokers: %s\nslot: %s\npublication: %s\n", tb.pgURL, tb.brokers, tb.slot(round, side, i), publication)
	if len(tables) > 1 {
		b.WriteString("tables:\n")
	}
	for _, ti := range tables {
		lines := append([]string{"table: " + tb.tables[ti].name}, tb.tables[ti].settings...)
		lines = append(lines, "topic-template: "+tb.topicBase(round, side, ti)+".{aggregate_type}")
		for j, l := range lines {
			switch {
			case len(tables) == 1:
			case j == 0:
				l = "  - " + l
			default:
				l = "    " + l
			}
			b.WriteString(l + "\n")
		}
	}
	path := tb.configPath(round, side, i)
	testkit.Must(t, os.WriteFile(path, []byte(b.String()), 0o600), "write %s", path)
	return path
}

// fill commits n single-row transactions, taking the tables in turn, and
// notes the end position.
func (tb *tablesBacklog) fill(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	m := newRowMaker(rand.Uint64(), tablesPayload)
	tb.perTable = make([]int64, len(tb.tables))
	tb.payloadBytes = loadWith(ctx, t, tb.pgURL, fmt.Sprintf("load %d rows into three tables", n), func(conn *pgx.Conn) (int64, error) {
		return loadSingles(ctx, conn, n, m, func(w *strings.Builder, i int, r row) {
			tb.perTable[i%len(tb.tables)]++
			tb.tables[i%len(tb.tables)].insert(w, r)
		})
	})
	tb.rows = int64(n)
	tb.markEnd(ctx, t)
}

// runSide drains a round's WAL with its side's relays (the three at once,
// or one after another), to Kafka, then checks that every table's topic of the run holds a record for every
// row of the table: duplicates are logged, a missing one fails the test.
func (tb *tablesBacklog) runSide(ctx context.Context, t *testing.T, round int, side tablesSide, within time.Duration) tablesRun {
	t.Helper()
	var runs []relayRun
	relays := 1
	if side != sideOne {
		relays = len(tb.tables)
	}
	for i := range relays {
		runs = append(runs, relayRun{bin: walrelayBin, slot: tb.slot(round, side, i), args: []string{"--config", tb.configPath(round, side, i)}})
	}
	groups := [][]relayRun{runs}
	if side == sideApart {
		groups = [][]relayRun{runs[:1], runs[1:2], runs[2:]}
	}
	var r tablesRun
	for _, g := range groups {
		ms, broker, jit := runRelays(ctx, t, tb.backlog, within, g...)
		r.add(ms, broker, jit)
	}
	for i := range tb.tables {
		topic := tb.topic(round, side, i)
		n, err := topicRecords(ctx, tb.brokers, topic)
		testkit.Must(t, err, "count the records of %s", topic)
		switch rows := tb.perTable[i]; {
		case n < rows:
			t.Errorf("round %d, %s: topic %s holds %d records; want %d (messages are missing)", round+1, side, topic, n, rows)
		case n > rows:
			t.Logf("round %d, %s: topic %s holds %d records for %d rows: %d duplicates", round+1, side, topic, n, rows, n-rows)
		}
	}
	return r
}

// tablesRun is one side's run: each relay's figures, and their total: the
// wall time of the side (of relays started together the longest, of groups
// run one after another the sum of theirs), the sum of the relays' CPU
// times, of their walsenders' and of their peak RSS, and the broker's CPU.
type tablesRun struct {
	relays []measure
	total  measure
}

// add counts a group of relays started together, whose broker CPU was
// broker (of it, jit the JIT compiler's), after the groups before it.
func (r *tablesRun) add(ms []measure, broker, jit time.Duration) {
	var wall, startup time.Duration
	for _, m := range ms {
		wall, startup = max(wall, m.wall), max(startup, m.startup)
		r.total.cpu += m.cpu
		r.total.walsender += m.walsender
		r.total.maxRSS += m.maxRSS
	}
	r.relays = append(r.relays, ms...)
	r.total.wall += wall
	r.total.startup += startup
	r.total.broker += broker
	r.total.brokerJIT += jit
}

// TestBenchTables is issue 36's benchmark: the same WAL of three outbox
// tables drained by one walrelay on one slot, then by three walrelays on
// three slots at once, side by side, to tables.md.
func TestBenchTables(t *testing.T) {
	pgURL, brokers, scale, loadBefore := setUp(t)
	ctx := context.Background()
	n := max(3, int(math.Round(tablesRows*scale)))
	rounds := tablesRounds(ctx, t, pgURL, roundsFor(t, shape{txns: n, perTxn: 1}, tablesPayload))
	tb := newTablesBacklog(ctx, t, pgURL, brokers, rounds)
	began := time.Now()
	tb.fill(ctx, t, n)
	t.Logf("loaded %d rows (%v per table) of ~%d B in %s: WAL %s..%s (%.1f MB); %d round(s)",
		n, tb.perTable, tablesPayload, time.Since(began).Round(time.Millisecond), tb.start, tb.end, float64(tb.end-tb.start)/1e6, rounds)
	settle(t)
	// A hang guard, not a target.
	within := 5*time.Minute + time.Duration(n)*5*time.Millisecond
	all := make([][sideCount]tablesRun, rounds)
	for round := range rounds {
		// The sides take turns going first: none always finds the WAL in
		// the page cache, nor a broker just warmed by another.
		for k := range sideCount {
			side := (tablesSide(round) + k) % sideCount
			r := tb.runSide(ctx, t, round, side, within)
			all[round][side] = r
			logTablesRun(t, round, side, r, n)
		}
	}
	md := tablesReport(t, pgURL, brokers, scale, tb, all, loadBefore+" before, "+benchenv.LoadAverage()+" after")
	t.Log("\n" + md)
	benchenv.WriteReport(t, "tables.md", md)
}

// slotsPerRound is the slots a round drains: the one relay's, and those of
// the three at once and of the three one after another.
const slotsPerRound = 7

// slotsSpared is how many of the server's free replication slots the
// benchmark leaves to others (tests running beside it).
const slotsSpared = 4

// tablesRounds is want, or fewer when the server's free replication slots
// (less slotsSpared) cannot hold want rounds' slots at once: every slot
// must exist before the load. The rig allows 20 (max_replication_slots).
func tablesRounds(ctx context.Context, t *testing.T, pgURL string, want int) int {
	t.Helper()
	pg := pgtest.Connect(t, pgURL, "")
	var free int
	err := pg.Pool.QueryRow(ctx, "SELECT current_setting('max_replication_slots')::int - count(*) FROM pg_replication_slots").Scan(&free)
	testkit.Must(t, err, "count the free replication slots")
	rounds := min(want, (free-slotsSpared)/slotsPerRound)
	if rounds < 1 {
		t.Fatalf("%d replication slots free; want at least %d (%d for a round, %d spared for others)", free, slotsPerRound+slotsSpared, slotsPerRound, slotsSpared)
	}
	if rounds < want {
		t.Logf("%d round(s), not %d: %d replication slots free, %d a round, %d spared for others", rounds, want, free, slotsPerRound, slotsSpared)
	}
	return rounds
}

func logTablesRun(t *testing.T, round int, side tablesSide, r tablesRun, rows int) {
	t.Helper()
	m := r.total
	t.Logf("round %d %-5s wall %6.2fs (start-up %.2fs)  %9.0f msg/s  walrelay cpu %6.2fs  rss %4d MiB  walsender cpu %6.2fs  broker cpu %5.2fs (JIT %4.2fs)",
		round+1, side, m.wall.Seconds(), m.startup.Seconds(), float64(rows)/m.wall.Seconds(), m.cpu.Seconds(), m.maxRSS>>20,
		m.walsender.Seconds(), m.broker.Seconds(), m.brokerJIT.Seconds())
	if len(r.relays) > 1 {
		for i, m := range r.relays {
			t.Logf("        relay of table %d: wall %6.2fs (start-up %.2fs)  walrelay cpu %6.2fs  rss %4d MiB  walsender cpu %6.2fs",
				i, m.wall.Seconds(), m.startup.Seconds(), m.cpu.Seconds(), m.maxRSS>>20, m.walsender.Seconds())
		}
	}
}
