package slot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// pubState is what pg_publication says of a publication.
type pubState struct {
	insert, update, delete, truncate, all bool
	tables                                []string
}

func (f *fixture) publication() pubState {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p pubState
	err := f.conn.QueryRow(ctx, `SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables,
		coalesce((SELECT array_agg(schemaname || '.' || tablename ORDER BY 1) FROM pg_publication_tables WHERE pubname = $1), '{}')
		FROM pg_publication WHERE pubname = $1`, f.pub).
		Scan(&p.insert, &p.update, &p.delete, &p.truncate, &p.all, &p.tables)
	if err != nil {
		f.t.Fatalf("read publication %q: got %v; want a row", f.pub, err)
	}
	return p
}

func (f *fixture) database() string {
	f.t.Helper()
	var db string
	if err := f.conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
		f.t.Fatalf("current_database(): got %v; want a row", err)
	}
	return db
}

// serverVersion is the server's server_version_num.
func (f *fixture) serverVersion() int {
	f.t.Helper()
	var v int
	if err := f.conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		f.t.Fatalf("server_version_num: got %v; want a row", err)
	}
	return v
}

// checkNewSlot verifies that info and the server both describe a fresh,
// permanent, logical pgoutput slot of the fixture's database.
func (f *fixture) checkNewSlot(info slot.Info) {
	f.t.Helper()
	got := f.slotInfo()
	// On PostgreSQL 17 and later the slot is a failover slot; the server
	// says when it was last released.
	want := slot.Info{Exists: true, Plugin: "pgoutput", Type: "logical", Database: f.database(),
		ConfirmedFlush: got.ConfirmedFlush, RestartLSN: got.RestartLSN, WALStatus: got.WALStatus,
		InactiveSince: got.InactiveSince, Failover: f.serverVersion() >= 170000}
	if got != want {
		f.t.Errorf("pg_replication_slots: got %+v; want %+v", got, want)
	}
	if got.ConfirmedFlush == 0 {
		f.t.Errorf("confirmed_flush_lsn: got 0/0; want a position")
	}
	if info != got {
		f.t.Errorf("Init's Info: got %+v; want %+v (pg_replication_slots)", info, got)
	}
	var temporary bool
	if err := f.conn.QueryRow(context.Background(), "SELECT temporary FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&temporary); err != nil {
		f.t.Fatalf("read slot %q: got %v; want a row", f.slot, err)
	}
	if temporary {
		f.t.Errorf("slot %q temporary: got true; want false", f.slot)
	}
}

func TestInitCreatesPublicationAndSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A table the publication must not cover.
	f.exec("CREATE TABLE " + f.other().Quoted() + " (id int)")

	first := f.initSlot()

	want := pubState{insert: true, tables: []string{f.table.String()}}
	if got := f.publication(); got.insert != want.insert || got.update || got.delete || got.truncate || got.all || !slices.Equal(got.tables, want.tables) {
		t.Errorf("publication %q: got %+v; want %+v", f.pub, got, want)
	}
	f.checkNewSlot(first)

	// WAL moves on, so a re-created slot would start at a later position.
	f.insert("between")
	f.exec("INSERT INTO " + f.other().Quoted() + " VALUES (1)")

	second := f.initSlot()
	if second != first {
		t.Errorf("second Init: got %+v; want %+v (the same slot, untouched)", second, first)
	}
	if got := f.slotInfo().ConfirmedFlush; got != first.ConfirmedFlush {
		t.Errorf("confirmed_flush_lsn after the second Init: got %s; want %s", got, first.ConfirmedFlush)
	}
	if got := f.publication(); !slices.Equal(got.tables, want.tables) {
		t.Errorf("publication tables after the second Init: got %v; want %v", got.tables, want.tables)
	}
}

func TestInitAcceptsUserPublication(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		publish string
		want    pubState
	}{
		{name: "insert only", publish: "insert", want: pubState{insert: true}},
		// More than walrelay needs: accepted with a warning, left as it is.
		{name: "all operations", publish: "insert, update, delete, truncate", want: pubState{insert: true, update: true, delete: true, truncate: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.createPublication(f.table, tc.publish)

			info := f.initSlot()

			f.checkNewSlot(info)
			tc.want.tables = []string{f.table.String()}
			if got := f.publication(); got.insert != tc.want.insert || got.update != tc.want.update || got.delete != tc.want.delete ||
				got.truncate != tc.want.truncate || got.all || !slices.Equal(got.tables, tc.want.tables) {
				t.Errorf("publication %q after Init: got %+v; want %+v (unchanged)", f.pub, got, tc.want)
			}
		})
	}
}

// refusal is a broken setup that both Init and Run must refuse.
type refusal struct {
	name string
	// subject is what is wrong and what the error must name: "slot",
	// "publication" or "table".
	subject string
	setup   func(f *fixture)
	// want are substrings of the error.
	want []string
}

func refusals() []refusal {
	return []refusal{
		{
			name:    "slot with plugin test_decoding",
			subject: "slot",
			setup: func(f *fixture) {
				f.exec("SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.slot)
			},
			want: []string{`plugin "test_decoding"`, "pgoutput"},
		},
		{
			name:    "publication without the table",
			subject: "publication",
			setup: func(f *fixture) {
				f.exec("CREATE TABLE " + f.other().Quoted() + " (id int)")
				f.createPublication(f.other(), "insert")
			},
			want: []string{"does not include table"},
		},
		{
			name:    "publication without inserts",
			subject: "publication",
			setup:   func(f *fixture) { f.createPublication(f.table, "update, delete") },
			want:    []string{"does not publish inserts"},
		},
		{
			name:    "table without the aggregate type column",
			subject: "table",
			setup:   func(f *fixture) { f.exec("ALTER TABLE " + f.table.Quoted() + " DROP COLUMN aggregate_type") },
			want: []string{`table columns: column "aggregate_type" is missing from `,
				"; fix: set schema.Columns.AggregateType to its column, or decoder.Config.AggregateTypeDefault to a constant"},
		},
		{
			name:    "payload of integer",
			subject: "table",
			setup: func(f *fixture) {
				f.exec("ALTER TABLE " + f.table.Quoted() + " ALTER COLUMN payload TYPE integer USING NULL")
			},
			want: []string{`table columns: column "payload" of `, " has type integer"},
		},
		{
			name:    "missing table",
			subject: "table",
			setup:   func(f *fixture) { f.exec("DROP TABLE " + f.table.Quoted()) },
			want:    []string{"does not exist"},
		},
	}
}

// physicalSlot is the refusal of a physical slot by the slot's name. It
// runs in a test that is not parallel (TestInitAndRunRefuseAPhysicalSlot):
// while a physical slot exists, the synchronized_standby_slots rule of
// every other check on the server has a physical slot to speak of.
var physicalSlot = refusal{
	name:    "physical slot",
	subject: "slot",
	setup: func(f *fixture) {
		f.exec("SELECT pg_create_physical_replication_slot($1)", f.slot)
	},
	want: []string{"physical", "logical pgoutput"},
}

func TestInitAndRunRefuseAPhysicalSlot(t *testing.T) {
	t.Run("init", func(t *testing.T) { initRefusal(t, physicalSlot) })
	t.Run("run", func(t *testing.T) { runRefusal(t, physicalSlot) })
}

func TestInitRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range refusals() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			initRefusal(t, tc)
		})
	}
}

func initRefusal(t *testing.T, tc refusal) {
	f := newFixture(t)
	tc.setup(f)
	before := f.slotInfo()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := slot.Init(ctx, f.config(), zaptest.NewLogger(t))

	checkRefusal(t, "Init", err, append(tc.want, f.name(tc.subject))...)
	// Init creates the publication first and no slot after a
	// failure; an existing slot is never touched.
	if got := f.slotInfo(); got != before {
		t.Errorf("slot after the refused Init: got %+v; want %+v", got, before)
	}
}

func TestRunPreflightRefuses(t *testing.T) {
	t.Parallel()
	cases := append(refusals(), refusal{
		name:    "missing slot",
		subject: "slot",
		setup:   func(*fixture) {},
		want:    []string{"does not exist", "walrelay init"},
	}, refusal{
		name:    "pending recovery",
		subject: "slot",
		setup:   (*fixture).beginRecovery,
		want:    []string{"recovery: a recovery of slot", "(every row, started at ", "is pending", "Run `walrelay recover` again"},
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runRefusal(t, tc)
		})
	}
}

func runRefusal(t *testing.T, tc refusal) {
	f := newFixture(t)
	// Everything else is right, so that the subject is what fails.
	if tc.subject == "publication" {
		f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
	} else {
		f.createPublication(f.table, "insert")
	}
	tc.setup(f)

	r := startRun(t, f.config(), 16)
	err := r.result(20 * time.Second)

	checkRefusal(t, "Run", err, append(tc.want, f.name(tc.subject))...)
	if !r.drain(time.Second) {
		t.Errorf("out after the refused Run: got open; want closed")
	}
}

// beginRecovery creates the slot and a pending recovery of every row for
// it, as `walrelay recover` leaves them when stopped half-way.
func (f *fixture) beginRecovery() {
	f.t.Helper()
	f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
	f.ensureRecoveries()
	if err := slot.BeginRecovery(context.Background(), f.conn, f.recoveries(), slot.Recovery{Slot: f.slot}); err != nil {
		f.t.Fatalf("BeginRecovery: got %v; want nil", err)
	}
}

// name is the fixture's name of a subject, as errors quote it.
func (f *fixture) name(subject string) string {
	switch subject {
	case "slot":
		return f.slot
	case "publication":
		return f.pub
	}
	return f.table.String()
}

func (f *fixture) createPublication(t schema.Table, publish string) {
	f.t.Helper()
	f.exec("CREATE PUBLICATION " + schema.QuoteIdentifier(f.pub) + " FOR TABLE " + t.Quoted() + " WITH (publish = '" + publish + "')")
}

func checkRefusal(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error; want one mentioning %q", what, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: got error %q; want it to mention %q", what, err, w)
		}
	}
}

// TestInvalidNamesRefusedBeforeConnecting points at a port nobody listens
// on: an error about the name, not about the connection, proves that no
// connection was attempted.
func TestInvalidNamesRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	valid := slot.Config{
		ConnString:  "postgres://x@127.0.0.1:1/x?connect_timeout=1",
		Slot:        "walrelay_ok",
		Publication: "walrelay_ok",
		Table:       schema.Table{Schema: "public", Name: "outbox"},
	}
	for _, tc := range []struct {
		name   string
		modify func(*slot.Config)
		want   string
	}{
		{"upper-case slot", func(c *slot.Config) { c.Slot = "Walrelay" }, "slot name"},
		{"slot with a quote", func(c *slot.Config) { c.Slot = `a"b` }, "slot name"},
		{"slot with a space", func(c *slot.Config) { c.Slot = "a b" }, "slot name"},
		{"slot too long", func(c *slot.Config) { c.Slot = strings.Repeat("a", 64) }, "slot name"},
		{"publication with a NUL", func(c *slot.Config) { c.Publication = "pub\x00" }, "publication name"},
		{"publication too long", func(c *slot.Config) { c.Publication = strings.Repeat("p", 64) }, "publication name"},
		{"empty publication", func(c *slot.Config) { c.Publication = "" }, "publication name"},
		{"empty table", func(c *slot.Config) { c.Table.Name = "" }, "table name"},
		{"recoveries table too long", func(c *slot.Config) { c.Recoveries = schema.Table{Schema: "public", Name: strings.Repeat("r", 64)} }, "recoveries table name"},
		{"empty url", func(c *slot.Config) { c.ConnString = "" }, "url is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tc.modify(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			_, err := slot.Init(ctx, cfg, zaptest.NewLogger(t))
			checkNoConnection(t, "Init", err, tc.want)

			_, err = slot.New(cfg, zaptest.NewLogger(t), nil)
			checkNoConnection(t, "New", err, tc.want)
		})
	}
	// The valid configuration does try to connect: the case above is not
	// vacuous.
	_, err := slot.Init(context.Background(), valid, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "connect") {
		t.Errorf("Init with valid names and an unreachable server: got %v; want a connection error", err)
	}
}

func checkNoConnection(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v; want an error mentioning %q", what, err, want)
	}
	if err != nil && strings.Contains(err.Error(), "connect") {
		t.Errorf("%s: got %q; want no connection attempt", what, err)
	}
}
