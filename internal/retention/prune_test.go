package retention_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/slot"
)

const (
	old   = 2 * time.Hour // past the tests' retention of one hour
	fresh = 0
)

// With the slot following the WAL, rows older than the period go, in
// batches of the configured size; newer rows stay.
func TestPruneDeletesOldConfirmedRowsInBatches(t *testing.T) {
	f := newFixture(t)
	f.commitRows(12, old)
	f.commitRows(13, old+time.Minute)
	keep, xid := f.commitRows(5, fresh)
	f.awaitHorizon(xid)
	f.follow()

	res, err := f.pruner(func(c *retention.Config) { c.Batch = 10 }).Run(context.Background())
	testkit.Must(t, err, "prune")
	if res.Deleted != 25 || res.Batches != 3 || res.DryRun {
		t.Errorf("result: deleted %d in %d batches (dry run %v); want 25 in 3 (10, 10, 5), not a dry run", res.Deleted, res.Batches, res.DryRun)
	}
	if res.Confirmed < res.Mark.InsertLSN || res.Mark.Xmin <= xid {
		t.Errorf("mark: slot confirmed %s for insert position %s, xmin %d; want confirmed >= insert position, xmin > %d",
			res.Confirmed, res.Mark.InsertLSN, res.Mark.Xmin, xid)
	}
	if age := time.Since(res.Mark.Cutoff); age < time.Hour-time.Minute || age > time.Hour+time.Minute {
		t.Errorf("cutoff %s is %s ago; want about an hour", res.Mark.Cutoff, age)
	}
	sameIDs(t, "rows left", f.ids(), keep)
}

// Batches that exactly divide the rows end with an empty DELETE, which is
// not counted.
func TestPruneCountsOnlyBatchesThatDeleted(t *testing.T) {
	f := newFixture(t)
	_, xid := f.commitRows(20, old)
	f.awaitHorizon(xid)
	f.follow()
	res, err := f.pruner(func(c *retention.Config) { c.Batch = 10 }).Run(context.Background())
	testkit.Must(t, err, "prune")
	if res.Deleted != 20 || res.Batches != 2 {
		t.Errorf("deleted %d in %d batches; want 20 in 2", res.Deleted, res.Batches)
	}
	if left := f.ids(); len(left) != 0 {
		t.Errorf("rows left: %d; want 0", len(left))
	}
}

// A transaction that commits after the mark is kept even when the slot
// has passed the mark's position but not its commit: the row's xmin is not
// below the mark's xmin. Without that guard its old occurred_at would have
// it deleted before walrelay published it. The next prune takes it.
func TestPruneKeepsRowsCommittedAfterTheMark(t *testing.T) {
	f := newFixture(t)
	gone, xid := f.commitRows(10, old)
	f.awaitHorizon(xid)
	ctx := context.Background()
	tx, err := f.db.Begin(ctx)
	testkit.Must(t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	late, lateXid := f.insert(tx, 4, old)

	p := f.pruner(nil)
	m, err := p.Mark(ctx)
	testkit.Must(t, err, "mark")
	testkit.Must(t, tx.Commit(ctx), "commit the late rows")
	afterCommit := f.walLSN()
	f.advanceTo(m.InsertLSN)
	if c := f.confirmed(); c != m.InsertLSN || c >= afterCommit {
		t.Fatalf("slot confirmed %s; want exactly the mark %s, before the late commit (WAL at %s)", c, m.InsertLSN, afterCommit)
	}
	if m.Xmin > lateXid {
		t.Fatalf("mark xmin %d; want at most the open transaction's xid %d", m.Xmin, lateXid)
	}
	_, err = p.WaitConfirmed(ctx, m)
	testkit.Must(t, err, "wait for the slot")
	deleted, batches, err := p.Delete(ctx, m)
	testkit.Must(t, err, "delete")
	if deleted != int64(len(gone)) || batches != 1 {
		t.Errorf("deleted %d in %d batches; want %d in 1", deleted, batches, len(gone))
	}
	sameIDs(t, "rows left after the first prune", f.ids(), late)

	f.awaitHorizon(lateXid)
	f.follow()
	res, err := f.pruner(nil).Run(ctx)
	testkit.Must(t, err, "second prune")
	if res.Deleted != int64(len(late)) || len(f.ids()) != 0 {
		t.Errorf("second prune deleted %d, left %d; want %d and 0", res.Deleted, len(f.ids()), len(late))
	}
}

// A slot that does not reach the mark (walrelay stopped) fails the prune
// after the wait, and nothing is deleted.
func TestPruneWaitsForTheSlotThenDeletesNothing(t *testing.T) {
	f := newFixture(t)
	all, xid := f.commitRows(15, old)
	f.awaitHorizon(xid)
	start := time.Now()
	res, err := f.pruner(func(c *retention.Config) { c.Wait = 2 * time.Second }).Run(context.Background())
	took := time.Since(start)
	var nc *retention.NotConfirmedError
	if !errors.As(err, &nc) {
		t.Fatalf("prune: got %v; want a *NotConfirmedError", err)
	}
	if nc.Slot != f.slot || nc.Want != res.Mark.InsertLSN || nc.Confirmed >= nc.Want || !strings.Contains(err.Error(), "is walrelay running?") {
		t.Errorf("error %q: slot %s confirmed %s want %s; want slot %s, confirmed before %s, and the question", err, nc.Slot, nc.Confirmed, nc.Want, f.slot, res.Mark.InsertLSN)
	}
	if took < 2*time.Second || took > 10*time.Second || res.Deleted != 0 {
		t.Errorf("took %s, deleted %d; want about 2s and 0", took, res.Deleted)
	}
	sameIDs(t, "rows left", f.ids(), all)
}

// A dry run reports what a prune would delete and deletes nothing.
func TestPruneDryRunDeletesNothing(t *testing.T) {
	f := newFixture(t)
	a, _ := f.commitRows(25, old)
	b, xid := f.commitRows(5, fresh)
	f.awaitHorizon(xid)
	f.follow()
	res, err := f.pruner(func(c *retention.Config) { c.Batch = 10; c.DryRun = true }).Run(context.Background())
	testkit.Must(t, err, "dry run")
	if res.Deleted != 25 || res.Batches != 3 || !res.DryRun {
		t.Errorf("dry run: would delete %d in %d batches (dry run %v); want 25 in 3, a dry run", res.Deleted, res.Batches, res.DryRun)
	}
	sameIDs(t, "rows left", f.ids(), append(a, b...))
}

// Cancelling stops the run between batches; the batches done stay done.
func TestPruneStopsBetweenBatchesWhenCancelled(t *testing.T) {
	f := newFixture(t)
	_, xid := f.commitRows(25, old)
	f.awaitHorizon(xid)
	f.follow()
	p := f.pruner(func(c *retention.Config) { c.Batch = 5; c.Pause = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := p.Mark(ctx)
	testkit.Must(t, err, "mark")
	_, err = p.WaitConfirmed(ctx, m)
	testkit.Must(t, err, "wait for the slot")
	time.AfterFunc(300*time.Millisecond, cancel)
	deleted, batches, err := p.Delete(ctx, m)
	if !errors.Is(err, context.Canceled) || deleted != 5 || batches != 1 {
		t.Errorf("delete: %d rows in %d batches, %v; want 5 in 1, cancelled in the pause", deleted, batches, err)
	}
	if left := len(f.ids()); left != 20 {
		t.Errorf("rows left: %d; want 20", left)
	}
}

// A slot that is not there, or a table that is not, fails at once.
func TestPruneRefusesAMissingSlotOrTable(t *testing.T) {
	f := newFixture(t)
	f.commitRows(3, old)
	start := time.Now()
	_, err := f.pruner(func(c *retention.Config) { c.Slot = f.slot + "_none" }).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not exist") || time.Since(start) > 5*time.Second {
		t.Errorf("missing slot: got %v after %s; want a prompt error saying it does not exist", err, time.Since(start))
	}
	_, err = f.pruner(func(c *retention.Config) { c.Table.Name += "_none" }).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing table: got %v; want an error saying it does not exist", err)
	}
	if left := len(f.ids()); left != 3 {
		t.Errorf("rows left: %d; want 3", left)
	}
}

// beginRecovery marks a recovery of the fixture's slot pending, needing the rows
// since since (nil: every row).
func (f *fixture) beginRecovery(since *time.Time) {
	f.t.Helper()
	r := slot.Recovery{Slot: f.slot, Since: since, StartedBy: "test:1"}
	testkit.Must(f.t, slot.BeginRecovery(context.Background(), f.db, f.cfg.RecoveryTable(), r), "mark a recovery pending")
}

// While the slot's recovery is pending, the rows it needs stay, however
// old and confirmed; older confirmed rows go. Once it is finished, the
// next prune takes them.
func TestPruneKeepsWhatAPendingRecoveryNeeds(t *testing.T) {
	f := newFixture(t)
	gone, _ := f.commitRows(10, 4*time.Hour)
	needed, _ := f.commitRows(6, 2*time.Hour)
	fresh, xid := f.commitRows(3, 0)
	f.awaitHorizon(xid)
	f.follow()
	since := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	f.beginRecovery(&since)

	res, err := f.pruner(nil).Run(context.Background())
	testkit.Must(t, err, "prune")
	r := res.KeptForRecovery
	if r == nil || r.Slot != f.slot || r.Since == nil || !r.Since.Equal(since) || !r.Pending() {
		t.Fatalf("kept for recovery: got %v; want the pending recovery since %s", r, since)
	}
	if res.Deleted != int64(len(gone)) || !res.Mark.Cutoff.Equal(since) {
		t.Errorf("deleted %d, cutoff %s; want %d, the recovery's since %s", res.Deleted, res.Mark.Cutoff, len(gone), since)
	}
	sameIDs(t, "rows left while the recovery is pending", f.ids(), append(needed, fresh...))

	testkit.Must(t, slot.FinishRecovery(context.Background(), f.db, f.cfg.RecoveryTable(), f.slot, 6, 0), "finish the recovery")
	res, err = f.pruner(nil).Run(context.Background())
	testkit.Must(t, err, "prune after the recovery")
	if res.KeptForRecovery != nil || res.Deleted != int64(len(needed)) {
		t.Errorf("after the recovery: kept for %v, deleted %d; want no recovery, %d deleted", res.KeptForRecovery, res.Deleted, len(needed))
	}
	sameIDs(t, "rows left after the recovery", f.ids(), fresh)
}

// A pending recovery of every row keeps every row; a finished one changes
// nothing.
func TestPruneAndARecoveryOfEveryRow(t *testing.T) {
	f := newFixture(t)
	rows, xid := f.commitRows(8, old)
	f.awaitHorizon(xid)
	f.follow()
	f.beginRecovery(nil)

	res, err := f.pruner(nil).Run(context.Background())
	testkit.Must(t, err, "prune")
	if r := res.KeptForRecovery; r == nil || r.Since != nil || res.Deleted != 0 || res.Confirmed == 0 {
		t.Errorf("result: kept for %v, deleted %d, confirmed %s; want a recovery of every row, nothing deleted, the slot past the mark", r, res.Deleted, res.Confirmed)
	}
	sameIDs(t, "rows left", f.ids(), rows)

	testkit.Must(t, slot.FinishRecovery(context.Background(), f.db, f.cfg.RecoveryTable(), f.slot, 8, 0), "finish the recovery")
	res, err = f.pruner(nil).Run(context.Background())
	testkit.Must(t, err, "prune after the recovery")
	if res.KeptForRecovery != nil || res.Deleted != int64(len(rows)) {
		t.Errorf("after the recovery: kept for %v, deleted %d; want no recovery, %d deleted", res.KeptForRecovery, res.Deleted, len(rows))
	}
}

// A slot that does not move while its recovery is pending (walrelay does
// not stream then) fails the prune with both reasons.
func TestPruneSaysWhyTheSlotDoesNotMove(t *testing.T) {
	f := newFixture(t)
	all, xid := f.commitRows(4, old)
	f.awaitHorizon(xid)
	f.beginRecovery(nil)
	_, err := f.pruner(func(c *retention.Config) { c.Wait = 200 * time.Millisecond }).Run(context.Background())
	var nc *retention.NotConfirmedError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), fmt.Sprintf("a recovery of slot %q (every row, started at ", f.slot)) ||
		!strings.Contains(err.Error(), "is pending") {
		t.Errorf("prune: got %v; want a *NotConfirmedError that names the pending recovery", err)
	}
	sameIDs(t, "rows left", f.ids(), all)
}
