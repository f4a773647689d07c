package slot_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// A schema, table and publication whose names would end an identifier, a
// string literal or the list of publication_names if walrelay pasted them
// bare: Init creates the publication for that table, the stream reads
// through it (START_REPLICATION's publication_names quoted as identifier
// and string), its rows arrive, and nothing else happens: the canary table
// the names try to drop is still there.
func TestHostileNamesStreamTheirOwnTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	canary := schema.Table{Schema: "public", Name: f.slot + "_other"}
	f.exec("CREATE TABLE " + canary.Quoted() + " (id int)")
	f.table = schema.Table{Schema: `S-"', ` + f.slot, Name: `O "'); DROP TABLE ` + canary.Name + `;--`}
	f.pub = `p"', \` + f.slot + `'); DROP TABLE ` + canary.Name[:16]
	f.db.DropPublication(f.pub)
	f.db.DropTable(f.table.Quoted())
	t.Cleanup(func() {
		_, err := f.db.Pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema.QuoteIdentifier(f.table.Schema)+" CASCADE")
		if err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	f.exec("CREATE SCHEMA " + schema.QuoteIdentifier(f.table.Schema))
	f.exec("CREATE TABLE " + f.table.Quoted() + " (id bigserial PRIMARY KEY, note text NOT NULL," +
		" message_id uuid, aggregate_type text, aggregate_id text, type text, payload jsonb)")

	f.initSlot()
	var pubTable string
	ctx := context.Background()
	err := f.conn.QueryRow(ctx, "SELECT schemaname || '|' || tablename FROM pg_publication_tables WHERE pubname = $1", f.pub).Scan(&pubTable)
	if want := f.table.Schema + "|" + f.table.Name; err != nil || pubTable != want {
		t.Fatalf("publication %q covers %q (%v); want %q", f.pub, pubTable, err, want)
	}
	r := startRun(t, f.config(), 1024)
	r.start(10 * time.Second)
	f.insert("through hostile names")
	tx := r.nextTxn(10 * time.Second)
	if got := tx.firstInsert(t); got != "through hostile names" {
		t.Errorf("the streamed insert's note: got %q; want %q", got, "through hostile names")
	}
	r.cancel()
	r.closeDrained()
	if err := r.result(10 * time.Second); err != nil {
		t.Errorf("Run after cancel: %v; want nil", err)
	}
	var exists bool
	if err := f.conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", canary.Quoted()).Scan(&exists); err != nil || !exists {
		t.Errorf("canary table %s: exists %v (%v); want it untouched", canary, exists, err)
	}
}
