package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// existingShape is an outbox table that exists before walrelay: its
// columns, the flags that map them (for schema, init and run), the flags
// only run takes, and how a row is written and what its record must be.
type existingShape struct {
	name     string
	tableSQL string
	// more is SQL run after the table's CREATE (its partitions); %[1]s is
	// the table's schema, quoted.
	more     string
	flags    []string
	runFlags []string
	expect   harness.Expect
	// write inserts the n-th row (version v of aggregate agg) into table
	// and returns the row as the verifier expects it.
	write func(tx pgx.Tx, table string, n int, agg string, v int64) (harness.Row, error)
}

// customTableSQL is a plain hand-made outbox table: walrelay's fields under
// other names, a bigserial id, a bytea payload, no headers or topic column,
// and a content type per row.
const customTableSQL = ` (seq bigserial PRIMARY KEY, stream text NOT NULL, stream_id text NOT NULL, version int NOT NULL,
	kind text NOT NULL, body bytea NOT NULL, content_type varchar(100), created timestamptz NOT NULL DEFAULT now(), note text)`

// partitionedTableSQL is the custom table partitioned by its event time,
// with an old partition and a default one.
const partitionedTableSQL = ` (seq bigserial, stream text NOT NULL, stream_id text NOT NULL, version int NOT NULL,
	kind text NOT NULL, body bytea NOT NULL, content_type varchar(100), created timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (seq, created)) PARTITION BY RANGE (created)`

const partitionsSQL = `CREATE TABLE %[1]s.outbox_2000 PARTITION OF %[1]s.outbox FOR VALUES FROM ('2000-01-01') TO ('2001-01-01');
	CREATE TABLE %[1]s.outbox_default PARTITION OF %[1]s.outbox DEFAULT`

// customContentTypes are the content types of the custom table's rows in
// turn: their own, and NULL and empty, which get the table's --content-type.
var customContentTypes = []*string{strptr("application/avro"), nil, strptr("text/csv; charset=utf-8"), strptr("")}

func existingShapes() []existingShape {
	base := time.Now().UTC().Truncate(time.Microsecond)
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	return []existingShape{{
		name:     "EF Core",
		tableSQL: efTableSQL,
		flags: []string{"--column-message-id", "MessageId", "--column-aggregate-id", "AggregateId", "--column-aggregate-version", "AggregateVersion",
			"--column-type", "Type", "--column-payload", "Payload", "--column-occurred-at", "OccurredAtUtc", "--aggregate-type-default", "order"},
		expect: harness.Expect{ContentType: "text/plain; charset=utf-8"},
		write: func(tx pgx.Tx, table string, n int, _ string, v int64) (harness.Row, error) {
			// EF Core's aggregate ids are uuids: one per aggregate of the test.
			r := harness.Row{ID: outbox.NewID().String(), AggregateType: "order", AggregateID: efAggregates[n%len(efAggregates)],
				Version: &v, Type: "order.placed.v1", Payload: fmt.Sprintf(`{"n":%d}`, n), OccurredAt: at(n)}
			_, err := tx.Exec(context.Background(), "INSERT INTO "+table+` ("MessageId", "AggregateId", "AggregateVersion", "Type", "Payload", "OccurredAtUtc", "AvailableAtUtc")
				VALUES ($1, $2, $3, $4, $5, $6, $6)`, r.ID, r.AggregateID, v, r.Type, r.Payload, r.OccurredAt)
			return r, err
		},
	}, {
		name:     "Debezium",
		tableSQL: debeziumTableSQL,
		flags:    []string{"--preset", "debezium"},
		expect:   harness.Expect{ContentType: "application/json", Headers: []string{"id"}},
		write: func(tx pgx.Tx, table string, n int, agg string, v int64) (harness.Row, error) {
			r := harness.Row{ID: outbox.NewID().String(), AggregateType: "order", AggregateID: agg, Type: "order.changed",
				Payload: fmt.Sprintf(`{"n": %d, "v": %d}`, n, v), OccurredAt: at(n)}
			_, err := tx.Exec(context.Background(), "INSERT INTO "+table+` (id, aggregatetype, aggregateid, type, payload, "timestamp")
				VALUES ($1, 'order', $2, $3, $4::jsonb, $5)`, r.ID, agg, r.Type, r.Payload, r.OccurredAt)
			return r, err
		},
	}, {
		name:     "custom",
		tableSQL: customTableSQL,
		flags: []string{"--column-message-id", "seq", "--column-aggregate-type", "stream", "--column-aggregate-id", "stream_id",
			"--column-aggregate-version", "version", "--column-type", "kind", "--column-payload", "body", "--column-occurred-at", "created",
			"--column-content-type", "content_type"},
		runFlags: []string{"--content-type", "application/vnd.acme.event"},
		write: func(tx pgx.Tx, table string, n int, agg string, v int64) (harness.Row, error) {
			ct := customContentTypes[n%len(customContentTypes)]
			r := harness.Row{AggregateType: "order", AggregateID: agg, Version: &v, Type: "order.changed", Payload: fmt.Sprintf("bytes %d", n),
				ContentType: "application/vnd.acme.event"}
			if ct != nil && *ct != "" {
				r.ContentType = *ct
			}
			err := tx.QueryRow(context.Background(), "INSERT INTO "+table+` (stream, stream_id, version, kind, body, content_type)
				VALUES ('order', $1, $2, $3, $4::bytea, $5) RETURNING seq::text, created`, agg, v, r.Type, []byte(r.Payload), ct).Scan(&r.ID, &r.OccurredAt)
			return r, err
		},
	}}
}

// allExistingShapes are existingShapes and the custom table partitioned.
func allExistingShapes() []existingShape {
	shapes := existingShapes()
	partitioned := shapes[2]
	partitioned.name, partitioned.tableSQL, partitioned.more = "partitioned", partitionedTableSQL, partitionsSQL
	return append(shapes, partitioned)
}

// efAggregates are the uuid aggregate ids of the EF Core shape's rows.
var efAggregates = []string{outbox.NewID().String(), outbox.NewID().String(), outbox.NewID().String()}

// `walrelay schema --existing` beside tables of four shapes (EF Core's,
// Debezium's, a hand-made one with a content type per row, and that one
// partitioned by time, whose rows arrive through the publication's
// publish_via_partition_root): the DDL it
// prints after reading the live table applies with psql -v ON_ERROR_STOP=1
// (or as one simple-protocol script without psql), twice, creates no
// table or index for the outbox table, and then init and run relay every
// row as its own, in order; the hand-made table's records carry each row's
// content type, and --content-type for a NULL or empty one.
func TestSchemaExistingBesideTableShapes(t *testing.T) {
	t.Parallel()
	for _, shape := range allExistingShapes() {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel() // its own fixture: see the package doc
			testSchemaExisting(t, shape)
		})
	}
}

func testSchemaExisting(t *testing.T, shape existingShape) {
	f := harness.New(t, "order")
	ctx := context.Background()
	table := schema.Table{Schema: "ex_" + f.ID, Name: "outbox"}
	pub := "pub_ex_" + f.ID
	t.Cleanup(func() {
		f.DB.Exec(ctx, "DROP PUBLICATION IF EXISTS "+schema.QuoteIdentifier(pub))                //nolint:errcheck // best effort
		f.DB.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema.QuoteIdentifier(table.Schema)+" CASCADE") //nolint:errcheck // best effort
	})
	ownerExec(t, f, "CREATE SCHEMA "+schema.QuoteIdentifier(table.Schema)+"; CREATE TABLE "+table.Quoted()+shape.tableSQL)
	if shape.more != "" {
		ownerExec(t, f, fmt.Sprintf(shape.more, schema.QuoteIdentifier(table.Schema)))
	}
	flags := append([]string{"--table", table.String(), "--publication", pub}, shape.flags...)
	indexes := func() int {
		var n int
		testkit.Must(t, f.DB.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND tablename = $2", table.Schema, table.Name).Scan(&n), "count indexes")
		return n
	}
	before := indexes()

	// Read against the live table as its owner, who applies the DDL (the
	// relay role may not see the table's schema before the grants).
	schemaArgs := append([]string{"--existing", "--postgres-url", f.PGURL, "--grant-to", harness.RelayRole}, flags...)
	ddl, stderr, code := f.Walrelay("schema", schemaArgs...)
	if code != 0 || stderr != "" {
		t.Fatalf("walrelay schema --existing: exit %d, stderr %q; want 0 and nothing on stderr", code, stderr)
	}
	if strings.Contains(ddl, "CREATE TABLE IF NOT EXISTS "+table.Quoted()+" ") || strings.Contains(ddl, "ON "+table.Quoted()+" (") {
		t.Errorf("walrelay schema --existing creates the outbox table or an index on it:\n%s", ddl)
	}
	for i := range 2 {
		applyWithOnErrorStop(t, f, ddl, i+1)
	}
	if after := indexes(); after != before {
		t.Errorf("indexes on the outbox table: %d after applying the DDL; want the %d it had", after, before)
	}
	if again := f.WalrelayOK("schema", schemaArgs...); again != ddl {
		t.Errorf("walrelay schema --existing once applied printed other DDL:\n%s\nwant:\n%s", again, ddl)
	}

	f.WalrelayOK("init", flags...)
	r := f.Run(append(flags, shape.runFlags...)...)
	r.WaitStarted()
	var rows []harness.Row
	versions := map[string]int64{}
	aggs := []string{"a-1", "a-2", "a-3"}
	for tx := range 3 {
		err := pgx.BeginFunc(ctx, f.DB, func(tx pgx.Tx) error {
			for range 4 {
				n := len(rows)
				agg := aggs[n%len(aggs)]
				versions[agg]++
				row, err := shape.write(tx, table.Quoted(), n, agg, versions[agg])
				if err != nil {
					return err
				}
				rows = append(rows, row)
			}
			return nil
		})
		testkit.Must(t, err, "write transaction %d", tx)
	}
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	rep := f.VerifyAs(rows, shape.expect)
	harness.AssertClean(t, rep, 0)
	t.Logf("%s table beside `walrelay schema --existing` (applied twice): %s", shape.name, rep)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}
}

// A table that does not fit the flags gets no DDL: `walrelay schema
// --existing` prints nothing on stdout and exits 1 with check's line.
func TestSchemaExistingRefusesATableThatDoesNotFit(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t)
	table := schema.Table{Schema: "public", Name: "ef_" + f.ID}
	f.PG.DropTable(table.Quoted())
	ownerExec(t, f, "CREATE TABLE "+table.Quoted()+efTableSQL)
	ef := existingShapes()[0].flags
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"no aggregate type", append([]string{"--table", table.String()}, ef[:len(ef)-2]...),
			`walrelay: table columns: column "aggregate_type" is missing from ` + table.String() + `; fix: set --column-aggregate-type to its column, or --aggregate-type-default to a constant.`},
		{"missing column", append([]string{"--table", table.String()}, append(ef, "--column-payload", "Body")...),
			`walrelay: table columns: column "Body" (payload) is missing from ` + table.String()},
		{"unreadable type", append([]string{"--table", table.String()}, append(ef, "--column-payload", "OccurredAtUtc", "--column-occurred-at", "AvailableAtUtc")...),
			`column "OccurredAtUtc" (payload) of ` + table.String() + ` has type timestamp with time zone`},
		{"missing table", append([]string{"--table", table.String() + "_none"}, ef...),
			"walrelay: outbox table: " + table.String() + "_none does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := f.Walrelay("schema", append([]string{"--existing", "--postgres-url", f.PGURL, "--grant-to", harness.RelayRole}, tc.flags...)...)
			if line := lastLine(stderr); code != 1 || stdout != "" || !strings.HasPrefix(line, "walrelay: ") || !strings.Contains(line, tc.want) {
				t.Errorf("walrelay schema --existing: exit %d, stdout %q, last line %q; want exit 1, nothing printed, %q", code, stdout, lastLine(stderr), tc.want)
			}
		})
	}
}

// A content type that is no media type makes its row a bad row: parked
// with a reason naming the column, its aggregate's later row behind it,
// the other aggregate's rows published with their own content types.
func TestContentTypeColumnBadValueIsParked(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	ctx := context.Background()
	table := schema.Table{Schema: "public", Name: "ct_" + f.ID}
	dead := schema.Table{Schema: "public", Name: table.Name + "_dead_letters"}
	pub := "pub_ct_" + f.ID
	f.PG.DropPublication(pub)
	f.PG.DropTable(table.Quoted(), dead.Quoted(), schema.Table{Schema: "public", Name: table.Name + "_recoveries"}.Quoted(),
		schema.Table{Schema: "public", Name: table.Name + "_topics"}.Quoted())
	ownerExec(t, f, "CREATE TABLE "+table.Quoted()+customTableSQL)
	custom := existingShapes()[2]
	flags := append([]string{"--table", table.String(), "--publication", pub}, custom.flags...)
	ddl := f.WalrelayOK("schema", append([]string{"--existing", "--postgres-url", f.PGURL, "--grant-to", harness.RelayRole}, flags...)...)
	testkit.Must(t, harness.ExecGrants(ctx, f.DB, ddl), "apply `walrelay schema --existing` DDL")
	f.WalrelayOK("init", flags...)
	r := f.Run(flags...)
	r.WaitStarted()
	insert := func(agg string, v int64, ct string) harness.Row {
		t.Helper()
		row := harness.Row{AggregateType: "order", AggregateID: agg, Version: &v, Type: "order.changed", Payload: "p " + agg, ContentType: ct}
		err := f.DB.QueryRow(ctx, "INSERT INTO "+table.Quoted()+` (stream, stream_id, version, kind, body, content_type)
			VALUES ('order', $1, $2, $3, $4::bytea, $5) RETURNING seq::text, created`, agg, v, row.Type, []byte(row.Payload), ct).Scan(&row.ID, &row.OccurredAt)
		testkit.Must(t, err, "insert a row of %s", agg)
		return row
	}
	first := insert("a-1", 1, "application/avro")
	bad := insert("a-2", 1, "json")
	behind := insert("a-2", 2, "application/avro")
	last := insert("a-1", 2, "text/csv")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	harness.AssertClean(t, f.Verify([]harness.Row{first, last}), 0)
	var n int
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT count(*) FROM "+dead.Quoted()+
		` WHERE (message_id = $1 AND blocked_by IS NULL AND reason LIKE '%column "content_type" (content type): "json" is not a media type%')`+
		" OR (message_id = $2 AND blocked_by = $1)", bad.ID, behind.ID).Scan(&n), "count dead letters")
	if n != 2 {
		t.Errorf("dead letters as wanted: %d; want row %s parked for its content type and row %s behind it", n, bad.ID, behind.ID)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}
}

// As walrelay's own role (the fixture's WALRELAY_POSTGRES_URL), before the
// grants this DDL holds, the table's schema is out of sight: the error
// says whom to connect as.
func TestSchemaExistingAsARoleThatCannotSeeTheTable(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t)
	ns := "hidden_" + f.ID
	t.Cleanup(func() {
		f.DB.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema.QuoteIdentifier(ns)+" CASCADE") //nolint:errcheck // best effort
	})
	ownerExec(t, f, "CREATE SCHEMA "+schema.QuoteIdentifier(ns)+"; CREATE TABLE "+schema.QuoteIdentifier(ns)+".outbox"+efTableSQL)
	stdout, stderr, code := f.Walrelay("schema", append([]string{"--existing", "--table", ns + ".outbox"}, existingShapes()[0].flags...)...)
	want := []string{"walrelay: read the outbox table: ", "permission denied for schema " + ns, "connect as a role that may see the table, such as its owner"}
	if line := lastLine(stderr); code != 1 || stdout != "" || !containsAll(line, want) {
		t.Errorf("walrelay schema --existing as walrelay's role: exit %d, stdout %q, last line %q; want exit 1, nothing printed, saying %q", code, stdout, line, want)
	}
}

// applyWithOnErrorStop applies sql as the fixture's owner the way
// migrations do: psql -v ON_ERROR_STOP=1 when the rig has psql, else one
// simple-protocol query of the whole script (which stops at its first
// error too).
func applyWithOnErrorStop(t *testing.T, f *harness.Fixture, sql string, round int) {
	t.Helper()
	if psql := psqlPath(); psql != "" {
		cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", f.PGURL, "-f", "-")
		cmd.Stdin = strings.NewReader(sql)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql -v ON_ERROR_STOP=1, time %d: %v\n%s\n%s", round, err, out, sql)
		}
		t.Logf("applied with %s -v ON_ERROR_STOP=1, time %d", psql, round)
		return
	}
	conn, err := f.DB.Acquire(context.Background())
	testkit.Must(t, err, "acquire a connection")
	defer conn.Release()
	if _, err := conn.Conn().PgConn().Exec(context.Background(), sql).ReadAll(); err != nil {
		t.Fatalf("apply the DDL as one script, time %d: %v\n%s", round, err, sql)
	}
}

// psqlPath is the rig's psql ($WALRELAY_TEST_PG_BIN), else the one on
// PATH; "" without either.
func psqlPath() string {
	if bin := os.Getenv("WALRELAY_TEST_PG_BIN"); bin != "" {
		if p := filepath.Join(bin, "psql"); fileExists(p) {
			return p
		}
	}
	p, _ := exec.LookPath("psql")
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
