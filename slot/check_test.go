package slot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// runCheck runs slot.Check on cfg with the default columns.
func runCheck(t *testing.T, cfg slot.Config) ([]check.Result, slot.Routes) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return slot.Check(ctx, cfg)
}

// statuses renders results as "name=status" for comparison.
func statuses(rs []check.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name + "=" + r.Status.String()
	}
	return out
}

func wantStatuses(t *testing.T, got []check.Result, want []string) {
	t.Helper()
	if !slices.Equal(statuses(got), want) {
		t.Errorf("checks:\ngot  %v\nwant %v\n%s", statuses(got), want, dump(got))
	}
	for _, r := range got {
		if (r.Status == check.OK) != (r.Fix == "") {
			t.Errorf("check %q is %s with fix %q; want a fix exactly when not ok", r.Name, r.Status, r.Fix)
		}
	}
}

func dump(rs []check.Result) string {
	var b strings.Builder
	_ = check.Report(rs).WriteText(&b)
	return b.String()
}

func find(t *testing.T, rs []check.Result, name string) check.Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("check %q: got none; want one in\n%s", name, dump(rs))
	return check.Result{}
}

// serverFacts are what the server's own settings make the checks say,
// whatever the rig's configuration is.
type serverFacts struct {
	keepSize   string // SHOW max_slot_wal_keep_size
	keepStatus string // warn when unlimited
	roleStatus string // warn for a superuser, ok with REPLICATION, else fail
	tlsStatus  string // ok for verify-full or a Unix socket, else warn
	versionNum int    // server_version_num
}

func (f *fixture) serverFacts() serverFacts {
	f.t.Helper()
	var sf serverFacts
	var super, repl bool
	err := f.conn.QueryRow(context.Background(), `SELECT current_setting('max_slot_wal_keep_size'), rolsuper, rolreplication,
		current_setting('server_version_num')::int FROM pg_roles WHERE rolname = current_user`).Scan(&sf.keepSize, &super, &repl, &sf.versionNum)
	if err != nil {
		f.t.Fatalf("read server facts: got %v; want a row", err)
	}
	sf.keepStatus = "ok"
	if sf.keepSize == "-1" {
		sf.keepStatus = "warn"
	}
	switch {
	case super:
		sf.roleStatus = "warn"
	case repl:
		sf.roleStatus = "ok"
	default:
		sf.roleStatus = "fail"
	}
	// The classification itself is tested in tls_test.go.
	tlsState, err := slot.TLSVerification(f.url)
	if err != nil {
		f.t.Fatalf("classify the test URL's TLS: got %v; want nil", err)
	}
	sf.tlsStatus = "warn"
	if tlsState.OK() {
		sf.tlsStatus = "ok"
	}
	return sf
}

// head is the results every check against the rig's server starts with:
// the rig is a primary without standbys, and PostgreSQL 18's
// idle_replication_slot_timeout is off there.
func (sf serverFacts) head() []string {
	h := []string{"postgres reachable=ok", "server version=ok", "server role=ok", "postgres provider=ok", "postgres tls=" + sf.tlsStatus, "wal_level=ok",
		"max_replication_slots=ok", "max_wal_senders=ok", "max_slot_wal_keep_size=" + sf.keepStatus}
	if sf.versionNum >= 180000 {
		h = append(h, "idle_replication_slot_timeout=ok")
	}
	return append(h, "role replication="+sf.roleStatus, "lock session=ok", "database connect=ok", "outbox table=ok", "table columns=ok")
}

// failover is the result on the slot's failover flag: none before
// PostgreSQL 17 (the rig has no standby to warn about) nor for a slot that
// is not logical; on 17 and later ok for a failover slot (as Init makes
// it), warn for another.
func (f *fixture) failover(sf serverFacts) []string {
	f.t.Helper()
	var logical, failover bool
	err := f.conn.QueryRow(context.Background(), `SELECT slot_type = 'logical', coalesce((to_jsonb(s)->>'failover')::bool, false)
		FROM pg_replication_slots s WHERE slot_name = $1`, f.slot).Scan(&logical, &failover)
	if errors.Is(err, pgx.ErrNoRows) || sf.versionNum < 170000 || !logical {
		return nil
	}
	if err != nil {
		f.t.Fatalf("read slot %q: got %v; want a row", f.slot, err)
	}
	if failover {
		return []string{"slot failover=ok"}
	}
	return []string{"slot failover=warn"}
}

var goodPublication = []string{"publication=ok", "publication inserts=ok", "publication table=ok", "publication scope=ok"}

// noRecovery is the result between the publication's and the slot's when
// no recovery of the slot is pending.
var noRecovery = []string{"recovery=ok"}

var goodSlot = []string{"slot=ok", "slot plugin=ok", "slot database=ok", "slot wal_status=ok", "slot lag=ok"}

func TestCheckGoodSetup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	info := f.initSlot()
	for i := range 5 {
		f.insert("row " + strconv.Itoa(i))
	}
	sf := f.serverFacts()

	got, _ := runCheck(t, f.config())
	t.Logf("check of a good setup:\n%s", dump(got))

	wantStatuses(t, got, slices.Concat(sf.head(), goodPublication, noRecovery, goodSlot, f.failover(sf)))
	if r := find(t, got, "wal_level"); r.Found != "logical" {
		t.Errorf("wal_level found: got %q; want %q", r.Found, "logical")
	}
	if r := find(t, got, "max_slot_wal_keep_size"); !strings.HasPrefix(r.Found, sf.keepSize) {
		t.Errorf("max_slot_wal_keep_size found: got %q; want it to start with the server's %q", r.Found, sf.keepSize)
	}
	if r := find(t, got, "slot database"); r.Found != f.database() {
		t.Errorf("slot database found: got %q; want %q", r.Found, f.database())
	}
	if r := find(t, got, "slot wal_status"); !strings.HasPrefix(r.Found, f.slotInfo().WALStatus) {
		t.Errorf("slot wal_status found: got %q; want it to start with %q", r.Found, f.slotInfo().WALStatus)
	}
	after := f.queryLSN("SELECT pg_current_wal_lsn()::text")
	lag := lagOf(t, find(t, got, "slot lag"))
	if lag == 0 || lag > uint64(after-info.ConfirmedFlush) {
		t.Errorf("slot lag: got %d bytes; want > 0 (5 inserts since init) and <= %d", lag, uint64(after-info.ConfirmedFlush))
	}
}

var lagBytes = regexp.MustCompile(`\((\d+) bytes\)`)

func lagOf(t *testing.T, r check.Result) uint64 {
	t.Helper()
	m := lagBytes.FindStringSubmatch(r.Found)
	if m == nil {
		t.Fatalf("slot lag found: got %q; want (N bytes) in it", r.Found)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// slotCase is a setup of the publication and the slot and what check
// must say of them.
type slotCase struct {
	name  string
	setup func(*fixture)
	pub   []string // results from "publication" up to before "slot"
	slot  []string
	found map[string]string // name -> text the found must contain
}

// A physical slot is a case of its own, not parallel: while it exists,
// the synchronized_standby_slots rule of every other check on the server
// has a physical slot to speak of. A test that is not parallel runs while
// the parallel ones wait, and its cleanup drops the slot before they go on.
func TestCheckPhysicalSlot(t *testing.T) {
	checkSlotCase(t, slotCase{
		name: "physical slot",
		setup: func(f *fixture) {
			f.createPublication(f.table, "insert")
			f.exec("SELECT pg_create_physical_replication_slot($1)", f.slot)
		},
		pub: goodPublication,
		// No WAL reserved: no wal_status, no confirmed position.
		slot:  []string{"slot=ok", "slot plugin=fail", "slot database=fail", "slot wal_status=warn", "slot lag=fail"},
		found: map[string]string{"slot plugin": "physical"},
	})
}

func TestCheckPublicationAndSlotProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []slotCase{
		{
			name:  "missing publication and slot",
			setup: func(*fixture) {},
			// The rig's role is the table's owner: init could create it.
			pub:   []string{"publication=fail", "publication create=ok"},
			slot:  []string{"slot=fail"},
			found: map[string]string{"publication": "does not exist", "slot": "does not exist"},
		},
		{
			name:  "missing slot",
			setup: func(f *fixture) { f.createPublication(f.table, "insert") },
			pub:   goodPublication,
			slot:  []string{"slot=fail"},
			found: map[string]string{"slot": "does not exist"},
		},
		{
			name:  "publication with update and delete",
			setup: func(f *fixture) { f.createPublication(f.table, "insert, update, delete"); f.initSlot() },
			pub:   []string{"publication=ok", "publication inserts=ok", "publication table=ok", "publication scope=warn"},
			slot:  goodSlot,
			found: map[string]string{"publication scope": "also publishes update, delete"},
		},
		{
			name:  "publication without inserts",
			setup: func(f *fixture) { f.createPublication(f.table, "update, delete"); f.createSlot() },
			pub:   []string{"publication=ok", "publication inserts=fail", "publication table=ok", "publication scope=warn"},
			slot:  goodSlot,
			found: map[string]string{"publication inserts": "does not publish inserts"},
		},
		{
			name: "publication of another table",
			setup: func(f *fixture) {
				f.exec("CREATE TABLE " + f.other().Quoted() + " (id int)")
				f.createPublication(f.other(), "insert")
				f.createSlot()
			},
			pub:   []string{"publication=ok", "publication inserts=ok", "publication table=fail", "publication scope=warn"},
			slot:  goodSlot,
			found: map[string]string{"publication table": "does not include", "publication scope": "1 other table"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkSlotCase(t, tc)
		})
	}
}

func checkSlotCase(t *testing.T, tc slotCase) {
	f := newFixture(t)
	tc.setup(f)

	got, _ := runCheck(t, f.config())
	t.Logf("check:\n%s", dump(got))

	sf := f.serverFacts()
	wantStatuses(t, got, slices.Concat(sf.head(), tc.pub, noRecovery, tc.slot, f.failover(sf)))
	for name, text := range tc.found {
		if r := find(t, got, name); !strings.Contains(r.Found, text) {
			t.Errorf("check %q found: got %q; want it to contain %q", name, r.Found, text)
		}
	}
}

// createSlot makes the fixture's pgoutput slot directly: Init would refuse
// a publication that cannot deliver the outbox.
func (f *fixture) createSlot() {
	f.t.Helper()
	f.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
}

// A role without REPLICATION fails; one with it passes. Neither owns the
// table, so neither could create the missing publication.
func TestCheckRole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attrs string
		want  string
	}{{"", "fail"}, {"REPLICATION", "ok"}} {
		t.Run("attributes "+tc.attrs, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cfg := f.config()
			cfg.ConnString = f.role(tc.attrs)

			got, _ := runCheck(t, cfg)

			head := f.serverFacts().head()
			i := slices.IndexFunc(head, func(s string) bool { return strings.HasPrefix(s, "role replication=") })
			head[i] = "role replication=" + tc.want
			wantStatuses(t, got, slices.Concat(head, []string{"publication=fail", "publication create=fail"}, noRecovery, []string{"slot=fail"}))
			if r := find(t, got, "publication create"); !strings.Contains(r.Found, "does not own") || !strings.Contains(r.Fix, "CREATE PUBLICATION") {
				t.Errorf("publication create: got found %q, fix %q; want `does not own` and the CREATE PUBLICATION to run", r.Found, r.Fix)
			}
		})
	}
}

// role creates a login role with attrs for the test and returns the
// fixture's URL with that user; the role is dropped in t.Cleanup.
func (f *fixture) role(attrs string) string {
	f.t.Helper()
	name := fmt.Sprintf("wrchk_%016x", rand.Uint64())
	f.exec("CREATE ROLE " + name + " LOGIN " + attrs)
	f.t.Cleanup(func() {
		if _, err := f.conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+name); err != nil {
			f.t.Errorf("cleanup: drop role %s: got %v; want nil", name, err)
		}
	})
	u, err := url.Parse(f.url)
	if err != nil {
		f.t.Fatalf("parse the test URL: got %v; want nil", err)
	}
	u.User = url.User(name)
	return u.String()
}

func TestCheckUnreachableServerSkipsTheRest(t *testing.T) {
	t.Parallel()
	cfg := slot.Config{
		ConnString:  "postgres://walrelay@127.0.0.1:1/walrelay?sslmode=disable",
		Publication: "walrelay_outbox",
		Table:       schema.Table{Schema: "public", Name: "outbox_messages"},
	}
	start := time.Now()
	got, routes := runCheck(t, cfg)
	wantStatuses(t, got, []string{"postgres reachable=fail"})
	if !strings.Contains(got[0].Found, "connect to postgres 127.0.0.1:1") {
		t.Errorf("found: got %q; want the connection error", got[0].Found)
	}
	if routes.Err == nil || routes.Messages != nil {
		t.Errorf("routes: got %+v; want an error and no messages", routes)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s; want a refused connection to fail at once", took)
	}
}

// Check reads the distinct routes of the latest 100000 rows, latest by
// their transaction: the oldest row, written before 100000 later ones, is
// not among them.
func TestCheckReadsRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := f.other()
	f.exec("CREATE TABLE " + tbl.Quoted() + " (aggregate_type text, type text, topic text, message_id uuid, aggregate_id text, payload jsonb)")
	ins := "INSERT INTO " + tbl.Quoted() + " "
	f.exec(ins + "VALUES ('ancient', 'a.v1', NULL)")
	f.exec(ins + "SELECT 'order', CASE WHEN i % 2 = 0 THEN 'order.created.v1' ELSE 'order.paid.v1' END, NULL FROM generate_series(1, 99998) i")
	f.exec(ins + "VALUES ('invoice', 'invoice.sent.v1', 'billing'), (NULL, 'x.v1', 'special')")
	cfg := f.config()
	cfg.Table = tbl

	_, routes := runCheck(t, cfg)

	if routes.Err != nil {
		t.Fatalf("routes: got error %v; want none", routes.Err)
	}
	want := []schema.Message{
		{AggregateType: "", Type: "x.v1", Topic: "special"},
		{AggregateType: "invoice", Type: "invoice.sent.v1", Topic: "billing"},
		{AggregateType: "order", Type: "order.created.v1"},
		{AggregateType: "order", Type: "order.paid.v1"},
	}
	if routes.Rows != 100000 || !equalRoutes(routes.Messages, want) {
		t.Errorf("routes: got %d rows %s; want 100000 rows %s", routes.Rows, routeText(routes.Messages), routeText(want))
	}

	// Without a topic column, every route has no topic.
	f.exec("ALTER TABLE " + tbl.Quoted() + " DROP COLUMN topic")
	_, routes = runCheck(t, cfg)
	want = []schema.Message{
		{AggregateType: "", Type: "x.v1"},
		{AggregateType: "invoice", Type: "invoice.sent.v1"},
		{AggregateType: "order", Type: "order.created.v1"},
		{AggregateType: "order", Type: "order.paid.v1"},
	}
	if routes.Err != nil || !equalRoutes(routes.Messages, want) {
		t.Errorf("routes without a topic column: got %s, %v; want %s", routeText(routes.Messages), routes.Err, routeText(want))
	}

	// Without an aggregate type column, every route has the default; with
	// neither, the rows cannot be decoded, and the routes say so.
	f.exec("ALTER TABLE " + tbl.Quoted() + " DROP COLUMN aggregate_type")
	cfg.AggregateTypeDefault = "order"
	_, routes = runCheck(t, cfg)
	want = []schema.Message{
		{AggregateType: "order", Type: "invoice.sent.v1"},
		{AggregateType: "order", Type: "order.created.v1"},
		{AggregateType: "order", Type: "order.paid.v1"},
		{AggregateType: "order", Type: "x.v1"},
	}
	if routes.Err != nil || !equalRoutes(routes.Messages, want) {
		t.Errorf("routes with a default aggregate type: got %s, %v; want %s", routeText(routes.Messages), routes.Err, routeText(want))
	}
	cfg.AggregateTypeDefault = ""
	if _, routes = runCheck(t, cfg); routes.Err == nil || routes.Messages != nil {
		t.Errorf("routes of a table without an aggregate type, no default: got %s, %v; want an error", routeText(routes.Messages), routes.Err)
	}
}

func equalRoutes(a, b []schema.Message) bool {
	return slices.EqualFunc(a, b, func(x, y schema.Message) bool {
		return x.AggregateType == y.AggregateType && x.Type == y.Type && x.Topic == y.Topic
	})
}

func routeText(ms []schema.Message) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("(%q %q %q)", m.AggregateType, m.Type, m.Topic)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// A pending recovery of the slot fails `check` and the preflight, in the
// recovery's words; finished, it passes. A recoveries table the role may
// not read fails the check as unreadable.
func TestCheckPendingRecovery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	f.ensureRecoveries()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	err := slot.BeginRecovery(ctx, f.conn, f.recoveries(), slot.Recovery{Slot: f.slot, Since: &since, StartedBy: "host-a:4242"})
	if err != nil {
		t.Fatalf("BeginRecovery: got %v; want nil", err)
	}
	sf := f.serverFacts()

	got, _ := runCheck(t, f.config())
	wantStatuses(t, got, slices.Concat(sf.head(), goodPublication, []string{"recovery=fail"}, goodSlot, f.failover(sf)))
	want := fmt.Sprintf(`a recovery of slot %q (rows since 2025-03-01T12:00:00Z, started at `, f.slot)
	if r := find(t, got, "recovery"); !strings.HasPrefix(r.Found, want) || !strings.HasSuffix(r.Found, " by host-a:4242) is pending") ||
		!strings.Contains(r.Fix, "walrelay recover") {
		t.Errorf("recovery: got found %q, fix %q; want %q..., the process and `walrelay recover`", r.Found, r.Fix, want)
	}
	_, err = slot.Preflight(ctx, f.config(), zaptest.NewLogger(t))
	var ce *slot.ConfigError
	if !errors.As(err, &ce) || ce.Result.Name != "recovery" {
		t.Errorf("Preflight: got %v; want the recovery rule's verdict", err)
	}

	if err := slot.FinishRecovery(ctx, f.conn, f.recoveries(), f.slot, 10, 0); err != nil {
		t.Fatalf("FinishRecovery: got %v; want nil", err)
	}
	got, _ = runCheck(t, f.config())
	wantStatuses(t, got, slices.Concat(sf.head(), goodPublication, noRecovery, goodSlot, f.failover(sf)))
	if _, err := slot.Preflight(ctx, f.config(), zaptest.NewLogger(t)); err != nil {
		t.Errorf("Preflight after the recovery finished: got %v; want nil", err)
	}

	cfg := f.config()
	cfg.ConnString = f.role("REPLICATION")
	got, _ = runCheck(t, cfg)
	if r := find(t, got, "recovery"); r.Status != check.Fail || !strings.Contains(r.Found, "cannot read") || !strings.Contains(r.Found, "permission denied") {
		t.Errorf("recovery as a role without SELECT on %s: got %s %q; want a failure saying it cannot read", f.recoveries(), r.Status, r.Found)
	}
}

// The table's columns are read from pg_attribute as pgoutput sends them
// (dropped and generated columns left out) and judged as the decoder
// will: the EF Core shape, with quoted PascalCase names and no aggregate
// type, passes with a default aggregate type and fails without one,
// naming the column and the settings; a payload of integer fails.
func TestCheckJudgesTheTableColumns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := f.other()
	f.exec("CREATE TABLE " + tbl.Quoted() + ` ("MessageId" uuid PRIMARY KEY, "Dropped" text, "AggregateId" uuid NOT NULL,
		"AggregateVersion" bigint NOT NULL, "Type" text NOT NULL, "Payload" text NOT NULL,
		"OccurredAtUtc" timestamptz NOT NULL, "AvailableAtUtc" timestamptz NOT NULL,
		"AggregateType" text GENERATED ALWAYS AS ('generated') STORED)`)
	f.exec("ALTER TABLE " + tbl.Quoted() + ` DROP COLUMN "Dropped"`)
	cfg := f.config()
	cfg.Table = tbl
	cfg.Columns = schema.Columns{MessageID: "MessageId", AggregateType: "AggregateType", AggregateID: "AggregateId",
		AggregateVersion: "AggregateVersion", Type: "Type", Payload: "Payload", Headers: "Headers", OccurredAt: "OccurredAtUtc", Topic: "Topic"}

	got, _ := runCheck(t, cfg)
	r := find(t, got, "table columns")
	wantFound := `column "AggregateType" (aggregate_type) is missing from ` + tbl.String()
	wantFix := "set schema.Columns.AggregateType to its column, or decoder.Config.AggregateTypeDefault to a constant."
	if r.Status != check.Fail || r.Found != wantFound || r.Fix != wantFix {
		t.Errorf("table columns without a default: got %+v; want fail, %q, %q", r, wantFound, wantFix)
	}

	cfg.AggregateTypeDefault = "order"
	got, routes := runCheck(t, cfg)
	r = find(t, got, "table columns")
	if r.Status != check.OK || !strings.Contains(r.Found, `absent, read as null: "Headers", "Topic"; no column "AggregateType": every row's aggregate type is "order"`) {
		t.Errorf("table columns with a default: got %+v; want ok, saying what is absent", r)
	}
	if routes.Err != nil {
		t.Errorf("routes with a default: got %v; want none", routes.Err)
	}

	f.exec("ALTER TABLE " + tbl.Quoted() + ` ALTER COLUMN "Payload" TYPE integer USING 0`)
	got, _ = runCheck(t, cfg)
	r = find(t, got, "table columns")
	if want := `column "Payload" (payload) of ` + tbl.String() + " has type integer; a payload column is"; r.Status != check.Fail || !strings.HasPrefix(r.Found, want) {
		t.Errorf("table columns with a payload of integer: got %+v; want fail, %q...", r, want)
	}
	t.Logf("table columns: %s; fix: %s", r.Found, r.Fix)
}
