package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/slot"
	"github.com/walrelay/walrelay/test/harness"
)

// TestPruneDeletesOnlyPublishedOldRows runs `walrelay prune` against a
// stopped and then a running relay: while nothing has confirmed the old
// rows, prune fails and deletes nothing; once walrelay has published them,
// prune deletes exactly the rows older than the period (in batches), keeps
// the new ones, and every deleted row's message is in Kafka.
func TestPruneDeletesOnlyPublishedOldRows(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	oldIDs, _ := insertAged(t, f, "old", 30, 2*time.Hour)
	newIDs, xid := insertAged(t, f, "new", 10, 0)

	// walrelay's own role (the harness's, without DELETE) is refused at
	// once, with no summary line, naming the role that may prune.
	stdout, stderr, code := f.Walrelay("prune", "--retention", "1h", "--prune-wait", "3s")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "role "+harness.RelayRole+" may not prune: it lacks DELETE on public."+f.Table) ||
		!strings.Contains(stderr, "run walrelay prune as the table's owner (") {
		t.Errorf("prune as walrelay's role: exit %d, stdout %q; want exit 1, no summary, and the role and the owner named:\n%s", code, stdout, stderr)
	}

	stdout, stderr, code = f.Walrelay("prune", "--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "3s")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "not yet past") || !strings.Contains(stderr, "is walrelay running?") {
		t.Errorf("prune with the relay stopped: exit %d, stdout %q; want exit 1, no summary, and the slot's position in the error:\n%s", code, stdout, stderr)
	}
	if n := len(f.OutboxRows()); n != 40 {
		t.Fatalf("rows after the refused prune: %d; want all 40", n)
	}

	r := f.Run("--heartbeat-interval", "1s")
	r.WaitStarted()
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)
	awaitSnapshotPast(t, f, xid)

	out := f.WalrelayOK("prune", "--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "30s", "--dry-run")
	if !strings.HasPrefix(out, "dry run: would prune 30 rows from public."+f.Table+" in 1 batch (") || len(f.OutboxRows()) != 40 {
		t.Errorf("dry run said %q and left %d rows; want 30 rows in 1 batch, and all 40 left", out, len(f.OutboxRows()))
	}
	out = f.WalrelayOK("prune", "--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "30s", "--prune-batch", "7", "--prune-pause", "10ms")
	if !strings.HasPrefix(out, "pruned 30 rows from public."+f.Table+" in 5 batches (") || strings.Count(out, "\n") != 1 {
		t.Errorf("prune said %q; want one line starting \"pruned 30 rows ... in 5 batches\" (7+7+7+7+2)", out)
	}
	t.Logf("walrelay prune: %s", strings.TrimSpace(out))
	wantIDs(t, fmt.Sprintf("rows left (the %d old ones gone)", len(oldIDs)), f, newIDs)
	r.Running()
}

// insertAged commits n rows, each its own aggregate at version 1, whose
// occurred_at is age ago, and returns their ids and the transaction's xid.
func insertAged(t *testing.T, f *harness.Fixture, prefix string, n int, age time.Duration) ([]string, uint64) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.DB.Begin(ctx)
	testkit.Must(t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	rows, err := tx.Query(ctx, `INSERT INTO `+f.Table+` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload, occurred_at)
		SELECT gen_random_uuid(), 'order', $1 || '-' || g, 1, 'order.submitted.v1', jsonb_build_object('n', g),
			now() - $3::bigint * interval '1 microsecond'
		FROM generate_series(1, $2) g RETURNING message_id::text`, f.ID+"-"+prefix, n, age.Microseconds())
	testkit.Must(t, err, "insert %d %s rows", n, prefix)
	var ids []string
	for rows.Next() {
		var id string
		testkit.Must(t, rows.Scan(&id), "scan id")
		ids = append(ids, id)
	}
	testkit.Must(t, rows.Err(), "insert %d %s rows", n, prefix)
	var s string
	testkit.Must(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&s), "read the xid")
	testkit.Must(t, tx.Commit(ctx), "commit %s rows", prefix)
	xid, err := strconv.ParseUint(s, 10, 64)
	testkit.Must(t, err, "parse xid %q", s)
	return ids, xid
}

// awaitSnapshotPast waits until no transaction older than xid runs on the
// server (tests of other packages share it): only then are the rows of xid
// and before the next prune's to delete.
func awaitSnapshotPast(t *testing.T, f *harness.Fixture, xid uint64) {
	t.Helper()
	pgtest.AwaitSnapshotPast(t, f.DB, xid)
}

// While a recovery of the slot is pending, `walrelay prune` keeps the rows
// it needs, however old and confirmed, deletes the older ones, and says so
// on its line; once the recovery is finished, the next prune takes them.
func TestPruneKeepsWhatAPendingRecoveryNeeds(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	oldIDs, _ := insertAged(t, f, "old", 20, 4*time.Hour)
	neededIDs, _ := insertAged(t, f, "needed", 10, 2*time.Hour)
	newIDs, xid := insertAged(t, f, "new", 5, 0)
	// The relay, started before the recovery (a new session would refuse),
	// keeps the slot passing prune's marks.
	r := f.Run("--heartbeat-interval", "1s")
	r.WaitStarted()
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	awaitSnapshotPast(t, f, xid)
	ctx := context.Background()
	since := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	err := slot.BeginRecovery(ctx, f.DB, recoveries(f), slot.Recovery{Slot: f.Slot, Since: &since, StartedBy: "e2e:1"})
	testkit.Must(t, err, "mark a recovery pending")

	prune := []string{"--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "30s"}
	out := f.WalrelayOK("prune", prune...)
	want := fmt.Sprintf(`; kept the rows a pending recovery of slot %q (rows since %s, started at `, f.Slot, since.Format(time.RFC3339))
	if !strings.HasPrefix(out, fmt.Sprintf("pruned 20 rows from public.%s in 1 batch (occurred_at before %s,", f.Table, since.Format(time.RFC3339))) ||
		!strings.Contains(out, want) || !strings.HasSuffix(out, " by e2e:1) needs\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("prune said %q; want one line: 20 rows before %s, and %q...", out, since.Format(time.RFC3339), want)
	}
	wantIDs(t, "rows left while the recovery is pending", f, append(neededIDs, newIDs...))

	testkit.Must(t, slot.FinishRecovery(ctx, f.DB, recoveries(f), f.Slot, int64(len(neededIDs)), 0), "finish the recovery")
	out = f.WalrelayOK("prune", prune...)
	if !strings.HasPrefix(out, "pruned 10 rows from ") || strings.Contains(out, "recovery") {
		t.Errorf("prune after the recovery said %q; want the 10 rows it had kept, no recovery", out)
	}
	wantIDs(t, fmt.Sprintf("rows left after the recovery (the %d old ones gone before)", len(oldIDs)), f, newIDs)
	r.Running()
}

// wantIDs fails the test unless the outbox holds exactly the rows ids.
func wantIDs(t *testing.T, what string, f *harness.Fixture, ids []string) {
	t.Helper()
	var left []string
	for _, row := range f.OutboxRows() {
		left = append(left, row.ID)
	}
	sort.Strings(left)
	want := append([]string(nil), ids...)
	sort.Strings(want)
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("%s: got %d rows %v; want %d %v", what, len(left), left, len(want), want)
	}
}
