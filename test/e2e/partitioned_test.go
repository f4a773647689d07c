package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// partitionRows is the seq range of the first two partitions.
const partitionRows = 1500

// A partitioned outbox (PARTITION BY RANGE on a sequence, the way users
// retire old rows by dropping partitions) under load. check explains a
// publication without publish_via_partition_root and its fix works; then a
// partition attached mid-run carries rows, and one detached mid-run (its
// rows written and perhaps not yet decoded) loses none: every row arrives,
// each aggregate in commit order.
func TestPartitionedOutboxWithPartitionsAttachedAndDetached(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order", "customer")
	ctx := context.Background()
	p1, p2, p3 := f.Table+"_p1", f.Table+"_p2", f.Table+"_p3"
	f.PG.DropTable(`"`+p1+`"`, `"`+p2+`"`, `"`+p3+`"`) // the sequence goes with the table
	// The fixture's table and publication, as `walrelay schema` made them,
	// replaced by a partitioned table of the same columns and a
	// publication made by hand, without publish_via_partition_root.
	ownerExec(t, f, fmt.Sprintf(`DROP PUBLICATION "%[2]s"; DROP TABLE "%[1]s";
		CREATE SEQUENCE "%[1]s_seq";
		CREATE TABLE "%[1]s" (
			message_id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, aggregate_version bigint,
			type text NOT NULL, payload jsonb NOT NULL, headers jsonb, occurred_at timestamptz NOT NULL DEFAULT now(), topic text,
			seq bigint NOT NULL DEFAULT nextval('"%[1]s_seq"'), PRIMARY KEY (message_id, seq)) PARTITION BY RANGE (seq);
		ALTER SEQUENCE "%[1]s_seq" OWNED BY "%[1]s".seq;
		CREATE TABLE "%[3]s" PARTITION OF "%[1]s" FOR VALUES FROM (0) TO (%[5]d);
		CREATE TABLE "%[4]s" PARTITION OF "%[1]s" FOR VALUES FROM (%[5]d) TO (%[6]d);
		GRANT SELECT ON "%[1]s" TO %[7]s;
		CREATE PUBLICATION "%[2]s" FOR TABLE "%[1]s" WITH (publish = 'insert')`,
		f.Table, f.Publication, p1, p2, partitionRows, 2*partitionRows, harness.RelayRole))

	stdout, _, code := f.Walrelay("check", "--json")
	report := parseCheck(t, stdout)
	c := findCheck(report, "publication partitions")
	wantFix := `ALTER PUBLICATION "` + f.Publication + `" SET (publish_via_partition_root = true).`
	if code == 0 || c.Status != "fail" || c.Fix != wantFix {
		t.Fatalf("check without publish_via_partition_root: exit %d, %+v; want a failure with the fix %s\n%s", code, c, wantFix, stdout)
	}
	for _, name := range []string{"publication table", "publication scope"} {
		if s := report.status(name); s == "fail" || s == "warn" {
			t.Errorf("check %s: %s; want no complaint about the table's own partitions:\n%s", name, s, stdout)
		}
	}
	ownerExec(t, f, strings.TrimSuffix(c.Fix, "."))
	f.WalrelayOK("init")
	stdout, stderr, code := f.Walrelay("check", "--json")
	report = parseCheck(t, stdout)
	if code != 0 || report.Fail != 0 || report.status("publication partitions") != "ok" {
		t.Fatalf("check after its fix and init: exit %d; want 0 with publication partitions ok\n%s%s", code, stdout, stderr)
	}

	r := f.Run()
	load, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := f.LoadUntil(load, harness.Load{Writers: 3, Rows: 150, MaxTxRows: 10, AggregatesPerWriter: 6,
		Types: []string{"order", "customer"}, Pause: 10 * time.Millisecond})
	seqPast := func(n int64) {
		poll.EventuallyEvery(t, 3*time.Minute, 50*time.Millisecond, fmt.Sprintf("the writers past seq %d", n), func() (string, bool) {
			r.Running()
			var last int64
			testkit.Must(t, f.DB.QueryRow(ctx, fmt.Sprintf(`SELECT last_value FROM "%s_seq"`, f.Table)).Scan(&last), "read seq")
			return fmt.Sprintf("seq at %d", last), last >= n
		})
	}
	// Attached while the writers fill the first partition: the rows past
	// the second go there.
	seqPast(100)
	ownerExec(t, f, fmt.Sprintf(`CREATE TABLE "%[2]s" (LIKE "%[1]s" INCLUDING DEFAULTS);
		ALTER TABLE "%[1]s" ATTACH PARTITION "%[2]s" FOR VALUES FROM (%[3]d) TO (MAXVALUE)`, f.Table, p3, 2*partitionRows))
	// Detached as soon as the writers moved on to the second: its last
	// rows may not be decoded yet.
	seqPast(partitionRows + 50)
	ownerExec(t, f, fmt.Sprintf(`ALTER TABLE "%s" DETACH PARTITION "%s"`, f.Table, p1))
	seqPast(2*partitionRows + 500)
	cancel()
	if rounds, failed := wait(); failed > 1 || rounds < 2 {
		t.Fatalf("writers: %d rounds, %d failed; want every round but the cut one to commit", rounds, failed)
	}
	f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	// Attached again to be read with the others: attaching publishes
	// nothing (no row is inserted).
	ownerExec(t, f, fmt.Sprintf(`ALTER TABLE "%s" ATTACH PARTITION "%s" FOR VALUES FROM (0) TO (%d)`, f.Table, p1, partitionRows))
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)
	var inP3 int
	testkit.Must(t, f.DB.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM "%s"`, p3)).Scan(&inP3), "count the attached partition")
	if inP3 < 400 {
		t.Errorf("the partition attached mid-run holds %d rows; want the writers' last 500 or so", inP3)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d; want 0", code)
	}
}

// ownerExec runs sql as the fixture's owner.
func ownerExec(t *testing.T, f *harness.Fixture, sql string) {
	t.Helper()
	if _, err := f.DB.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// An outbox partitioned by RANGE on occurred_at, retired the usual way:
// `walrelay prune --drop-partitions` drops the partition wholly older than
// the retention once walrelay has published its rows, deletes nothing else
// of the newer partition but its own old rows, and the running relay goes
// on with the partitions left.
func TestPruneDropsTheOldPartitionsOfAPartitionedOutbox(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	old, recent := f.Table+"_old", f.Table+"_recent"
	f.PG.DropTable(`"`+old+`"`, `"`+recent+`"`)
	ownerExec(t, f, fmt.Sprintf(`DROP PUBLICATION "%[2]s"; DROP TABLE "%[1]s";
		CREATE TABLE "%[1]s" (
			message_id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, aggregate_version bigint,
			type text NOT NULL, payload jsonb NOT NULL, headers jsonb, occurred_at timestamptz NOT NULL DEFAULT now(), topic text,
			PRIMARY KEY (message_id, occurred_at)) PARTITION BY RANGE (occurred_at);
		CREATE TABLE "%[3]s" PARTITION OF "%[1]s" FOR VALUES FROM (now() - interval '1 day') TO (now() - interval '90 minutes');
		CREATE TABLE "%[4]s" PARTITION OF "%[1]s" FOR VALUES FROM (now() - interval '90 minutes') TO (MAXVALUE);
		GRANT SELECT ON "%[1]s" TO %[5]s;
		CREATE PUBLICATION "%[2]s" FOR TABLE "%[1]s" WITH (publish = 'insert', publish_via_partition_root = true)`,
		f.Table, f.Publication, old, recent, harness.RelayRole))
	f.WalrelayOK("init")
	oldIDs, _ := insertAged(t, f, "old", 30, 2*time.Hour) // the old partition
	_, _ = insertAged(t, f, "older", 5, 80*time.Minute)   // the recent one, past the retention
	keep, xid := insertAged(t, f, "new", 10, 0)           // the recent one
	r := f.Run("--heartbeat-interval", "1s")
	r.WaitStarted()
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	published := f.OutboxRows()
	harness.AssertClean(t, f.Verify(published), 0)
	awaitSnapshotPast(t, f, xid)

	out := f.WalrelayOK("prune", "--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "30s", "--drop-partitions")
	want := fmt.Sprintf("pruned 5 rows from public.%s in 1 batch (", f.Table)
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "; dropped 1 partition whose range is older: public."+old) {
		t.Errorf("prune --drop-partitions said %q; want %q... and the old partition dropped", out, want)
	}
	t.Logf("walrelay prune --drop-partitions: %s (the %d rows of the old partition with it)", strings.TrimSpace(out), len(oldIDs))
	wantIDs(t, "rows left", f, keep)
	var gone bool
	testkit.Must(t, f.DB.QueryRow(context.Background(), `SELECT to_regclass($1) IS NULL`, `"`+old+`"`).Scan(&gone), "look for the old partition")
	if !gone {
		t.Errorf("partition %s after the prune: exists; want it dropped", old)
	}
	// The relay goes on: rows written after the drop arrive.
	later, _ := insertAged(t, f, "later", 10, 0)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	r.Running()
	wantIDs(t, "rows at the end", f, append(keep, later...))
	seen := map[string]bool{}
	for _, row := range published {
		seen[row.ID] = true
	}
	for _, row := range f.OutboxRows() {
		if !seen[row.ID] {
			published = append(published, row)
		}
	}
	harness.AssertClean(t, f.Verify(published), 0)
}
