//go:build faults

package faults

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
)

// Without synchronized_standby_slots the primary lets walrelay decode WAL
// the standby may not have yet. Killed then, the primary takes with it the
// rows walrelay may already have published: records in Kafka whose rows
// the promoted standby never had (the reverse of loss). This measures how
// many, under load on loopback, and checks that nothing the new primary
// has is lost or out of order, nor published twice. (With the setting, test/e2e's TestFailover
// requires none.)
func TestFailoverWithoutSynchronizedStandbySlots(t *testing.T) {
	parallel(t)
	if pgserver.Major() < 17 {
		t.Skipf("PostgreSQL %d has no failover slots: test/e2e's TestFailover covers it", pgserver.Major())
	}
	p := harness.NewPair(t, false)
	r, stopLoad := p.StartUnderLoad(t)
	synced := p.SyncedSlot(t)
	time.Sleep(2 * time.Second)
	began, promoted := p.Failover(t, "kill")
	r.WaitLine(`"PostgreSQL failed over`, 2*time.Minute)
	resumed := time.Since(began)
	time.Sleep(2 * time.Second)
	rounds, failed := stopLoad()
	p.F.WaitConfirmed(r, p.F.CurrentLSN(), 2*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	rows := p.F.OutboxRows()
	rep := p.F.Verify(rows)
	t.Logf("failover without synchronized_standby_slots: %d rows on the new primary from %d rounds (%d cut); slot synced after %s; promoted %s after the kill, walrelay streaming %s after; published but not on the new primary: %d; %s",
		len(rows), rounds, failed, synced.Round(time.Millisecond), promoted.Round(time.Millisecond), resumed.Round(time.Millisecond), len(rep.Unexpected), rep)
	for what, items := range map[string][]string{"lost": rep.Lost, "mismatched": rep.Mismatches, "out of order": rep.OutOfOrder, "split": rep.SplitAggregates} {
		if len(items) > 0 {
			t.Errorf("%s: %d, first %v; want none", what, len(items), items[:min(3, len(items))])
		}
	}
	// What the synced slot replays from before the old timeline ended is
	// in Kafka, and the new primary's timeline history says where that is:
	// resumed from Kafka (the default), no duplicates but an in-doubt
	// write (1,200 of 119,637 rows without it, docs/RELIABILITY.md).
	if limit := len(rows) / 1000; rep.Duplicates > limit {
		t.Errorf("duplicates = %d; want at most %d (0.1%%)", rep.Duplicates, limit)
	}
}
