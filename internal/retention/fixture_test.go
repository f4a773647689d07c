package retention_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

// fixture is one test's outbox table (from the real DDL, with its index),
// publication and logical slot, all dropped in t.Cleanup. The test moves
// the slot itself with pg_replication_slot_advance, as walrelay's
// confirmations would.
type fixture struct {
	t    *testing.T
	db   *pgxpool.Pool
	cfg  schema.Config
	slot string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := pgtest.New(t, "wrprune_")
	name := pg.Name
	f := &fixture{t: t, db: pg.Pool, slot: name, cfg: schema.DefaultConfig()}
	f.cfg.Table = schema.Table{Schema: "public", Name: name}
	f.cfg.Publication = name
	pg.DropSlot(name)
	pg.DropPublication(f.cfg.Publication)
	pg.DropTable(f.cfg.Table.Quoted(), f.cfg.DeadLetterTable().Quoted(), f.cfg.RecoveryTable().Quoted())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ddl, err := schema.DDL(f.cfg)
	testkit.Must(t, err, "render the DDL")
	_, err = pg.Pool.Exec(ctx, ddl)
	testkit.Must(t, err, "apply the DDL")
	_, err = pg.Pool.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name)
	testkit.Must(t, err, "create slot %s", name)
	return f
}

// pruner returns a Pruner of the fixture's table and slot; change adjusts
// its configuration.
func (f *fixture) pruner(change func(*retention.Config)) *retention.Pruner {
	f.t.Helper()
	c := retention.Config{Table: f.cfg.Table, Slot: f.slot, Retention: time.Hour, Pause: time.Millisecond, PollInterval: 50 * time.Millisecond}
	if change != nil {
		change(&c)
	}
	p, err := retention.New(c, f.db, zaptest.NewLogger(f.t))
	testkit.Must(f.t, err, "new pruner")
	return p
}

// insertSQL writes n rows whose occurred_at is $2 microseconds ago.
const insertSQL = `INSERT INTO %s (message_id, aggregate_type, aggregate_id, type, payload, occurred_at)
	SELECT gen_random_uuid(), 'order', 'a-' || g, 'order.submitted.v1', '{}', now() - $2::bigint * interval '1 microsecond'
	FROM generate_series(1, $1) g RETURNING message_id::text`

// insert commits n rows as old as age in one transaction on q and returns
// their ids and the transaction's xid.
func (f *fixture) insert(q pgx.Tx, n int, age time.Duration) (ids []string, xid uint64) {
	f.t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, fmt.Sprintf(insertSQL, f.cfg.Table.Quoted()), n, age.Microseconds())
	testkit.Must(f.t, err, "insert %d rows", n)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	testkit.Must(f.t, err, "insert %d rows", n)
	var s string
	testkit.Must(f.t, q.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&s), "read the xid")
	xid, err = strconv.ParseUint(s, 10, 64)
	testkit.Must(f.t, err, "parse xid %q", s)
	return ids, xid
}

// commitRows inserts and commits n rows as old as age.
func (f *fixture) commitRows(n int, age time.Duration) (ids []string, xid uint64) {
	f.t.Helper()
	tx, err := f.db.Begin(context.Background())
	testkit.Must(f.t, err, "begin")
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit it does nothing
	ids, xid = f.insert(tx, n, age)
	testkit.Must(f.t, tx.Commit(context.Background()), "commit")
	return ids, xid
}

// awaitHorizon waits until no transaction that began before xid ended runs
// anywhere in the cluster (other tests share the server): then a prune's
// snapshot xmin is past xid, and rows of xid are the pruner's to delete.
func (f *fixture) awaitHorizon(xid uint64) {
	f.t.Helper()
	pgtest.AwaitSnapshotPast(f.t, f.db, xid)
}

// ids returns the ids left in the table, sorted.
func (f *fixture) ids() []string {
	f.t.Helper()
	rows, err := f.db.Query(context.Background(), "SELECT message_id::text FROM "+f.cfg.Table.Quoted()+" ORDER BY 1")
	testkit.Must(f.t, err, "read ids")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	testkit.Must(f.t, err, "read ids")
	return ids
}

func (f *fixture) confirmed() pglogrepl.LSN {
	f.t.Helper()
	var lsn pglogrepl.LSN
	err := f.db.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&lsn)
	testkit.Must(f.t, err, "read the slot")
	return lsn
}

func (f *fixture) walLSN() pglogrepl.LSN {
	f.t.Helper()
	var lsn pglogrepl.LSN
	testkit.Must(f.t, f.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn), "read the WAL position")
	return lsn
}

// advanceTo moves the slot to exactly lsn, once the server has flushed the
// WAL that far (advancing stops at the flushed position).
func (f *fixture) advanceTo(lsn pglogrepl.LSN) {
	f.t.Helper()
	poll.Eventually(f.t, 10*time.Second, "slot confirmed "+lsn.String(), func() (string, bool) {
		got := f.confirmed()
		if got >= lsn {
			return "", true
		}
		_, err := f.db.Exec(context.Background(), "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)", f.slot, lsn.String())
		testkit.Must(f.t, err, "advance slot %s to %s", f.slot, lsn)
		return "slot confirmed " + got.String(), false
	})
}

// follow advances the slot to the server's WAL position every 50ms until
// the test ends, as a running walrelay confirms everything it is sent.
func (f *fixture) follow() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			f.db.Exec(ctx, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", f.slot) //nolint:errcheck // retried in 50ms
			time.Sleep(50 * time.Millisecond)
		}
	}()
	f.t.Cleanup(func() { cancel(); wg.Wait() })
}

// sameIDs fails the test unless got and want hold the same ids.
func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: got %d ids %v; want %d ids %v", what, len(got), got, len(want), want)
	}
}
