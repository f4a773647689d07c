package slot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// Before Init the status reads the slot and the publication as missing,
// without an error.
func TestReadStatusMissing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := readStatus(t, f)
	if st.Exists || st.Active || st.ConfirmedFlush != 0 || st.WALStatus != "" {
		t.Errorf("missing slot: got %+v; want Exists=false and nothing else", st.Info)
	}
	if st.CurrentWAL == 0 {
		t.Errorf("CurrentWAL of a missing slot: got 0/0; want the server's position")
	}
	if st.Publication.Exists || len(st.Publication.Tables) != 0 {
		t.Errorf("missing publication: got %+v; want Exists=false, no tables", st.Publication)
	}
}

// After Init and some inserts, the status says what pg_replication_slots
// and pg_publication_tables say, read independently; after the publication
// changes, so does the status.
func TestReadStatusAgreesWithServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	for i := range 10 {
		f.insert("row " + string(rune('a'+i)))
	}

	lagBefore := f.serverLag()
	st := readStatus(t, f)
	lagAfter := f.serverLag()
	if want := f.slotInfo(); st.Info != want {
		t.Errorf("slot: got %+v; want %+v (pg_replication_slots)", st.Info, want)
	}
	if st.WALStatus == "" || st.Active {
		t.Errorf("wal_status %q, active %v; want a wal_status and an inactive slot", st.WALStatus, st.Active)
	}
	if lag := st.LagBytes(); lag != uint64(st.CurrentWAL-st.ConfirmedFlush) || lag < lagBefore || lag > lagAfter || lag == 0 {
		t.Errorf("lag: got %d bytes (current %s, confirmed %s); want current - confirmed, between %d and %d (pg_wal_lsn_diff before and after), > 0 after 10 inserts",
			lag, st.CurrentWAL, st.ConfirmedFlush, lagBefore, lagAfter)
	}
	if got, want := st.Publication.Tables, f.publicationTables(); !sameTables(got, want) || len(want) != 1 {
		t.Errorf("publication tables: got %v; want %v (pg_publication_tables), one table", got, want)
	}
	if !st.Publication.Exists || !st.Publication.InsertsOnly() || !st.Publication.Covers(f.table) || st.Publication.AllTables {
		t.Errorf("publication: got %+v; want existing, inserts only, covering %s", st.Publication, f.table)
	}

	other := f.other()
	f.exec("CREATE TABLE " + other.Quoted() + " (id int)")
	f.exec("ALTER PUBLICATION " + schema.QuoteIdentifier(f.pub) + " ADD TABLE " + other.Quoted())
	f.exec("ALTER PUBLICATION " + schema.QuoteIdentifier(f.pub) + " SET (publish = 'insert, delete')")
	st = readStatus(t, f)
	if got, want := st.Publication.Tables, f.publicationTables(); !sameTables(got, want) || len(want) != 2 {
		t.Errorf("publication tables after ADD TABLE: got %v; want %v (pg_publication_tables), two tables", got, want)
	}
	if p := st.Publication; p.InsertsOnly() || !p.Insert || !p.Delete || p.Update || p.Truncate {
		t.Errorf("publication after publish = 'insert, delete': got %+v; want insert and delete only", p)
	}
}

// An unreachable server is an error that does not quote the URL.
func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := slot.Config{
		ConnString:  "postgres://walrelay:s3cret-pw@127.0.0.1:1/walrelay?sslmode=disable",
		Publication: "p",
		Table:       schema.Table{Schema: "public", Name: "t"},
	}
	conn, err := slot.Connect(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("Connect to 127.0.0.1:1: got nil; want an error")
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "postgres://") {
		t.Errorf("error: got %q; want no password and no URL", msg)
	}
}

// readStatus reads the fixture's status over its own connection.
func readStatus(t *testing.T, f *fixture) slot.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := slot.Connect(ctx, f.config())
	if err != nil {
		t.Fatalf("Connect: got %v; want nil", err)
	}
	defer conn.Close(ctx)
	st, err := slot.ReadStatus(ctx, conn, f.slot, f.pub)
	if err != nil {
		t.Fatalf("ReadStatus: got %v; want nil", err)
	}
	return st
}

// serverLag is pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)
// of the fixture's slot.
func (f *fixture) serverLag() uint64 {
	f.t.Helper()
	var lag int64
	err := f.conn.QueryRow(context.Background(),
		"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
		f.slot).Scan(&lag)
	if err != nil {
		f.t.Fatalf("read the slot's lag: got %v; want a row", err)
	}
	return uint64(lag)
}

// publicationTables lists pg_publication_tables of the fixture's
// publication in the server's order.
func (f *fixture) publicationTables() []schema.Table {
	f.t.Helper()
	rows, err := f.conn.Query(context.Background(),
		"SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1", f.pub)
	if err != nil {
		f.t.Fatalf("read pg_publication_tables: got %v; want rows", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schema.Table, error) {
		var tb schema.Table
		return tb, r.Scan(&tb.Schema, &tb.Name)
	})
	if err != nil {
		f.t.Fatalf("read pg_publication_tables: got %v; want rows", err)
	}
	return tables
}

// sameTables compares two table lists as sets: neither catalog promises an
// order.
func sameTables(a, b []schema.Table) bool {
	key := func(ts []schema.Table) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.String()
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
