package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
)

// On PostgreSQL 17 and later, with a failover slot synchronised to the
// standby and synchronized_standby_slots set, a failover loses nothing and
// publishes nothing the new primary does not have: the primary is killed
// (SIGKILL) mid-load, or stopped for a planned switchover, the standby is
// promoted, and walrelay follows it through the multi-host connection
// string. Every row on the new primary is in Kafka, in order; no record in
// Kafka lacks its row there. Below 17 no slot survives, and walrelay stops
// with where the gap starts instead of creating a new slot.
func TestFailover(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	for _, mode := range []string{"kill", "switchover"} {
		t.Run(mode, func(t *testing.T) {
			if pgserver.Major() >= 17 {
				failoverLosesNothing(t, mode)
				return
			}
			failoverWithoutFailoverSlotsStops(t, mode)
		})
	}
}

func failoverLosesNothing(t *testing.T, mode string) {
	p := harness.NewPair(t, true)
	r, stopLoad := p.StartUnderLoad(t)
	t.Logf("the standby had a synced copy of the slot after %s", p.SyncedSlot(t).Round(time.Millisecond))
	checkReadiness(t, p, "ok")
	time.Sleep(2 * time.Second) // load streams through walrelay

	before := p.Primary.Timeline(t)
	began, promoted := p.Failover(t, mode)
	r.WaitLine(`"PostgreSQL failed over`, 2*time.Minute)
	resumed := time.Since(began)
	time.Sleep(2 * time.Second) // load streams through the new primary
	rounds, failed := stopLoad()

	if after := p.Standby.Timeline(t); after != before+1 {
		t.Errorf("timeline of the new primary: got %d; want %d", after, before+1)
	}
	p.F.WaitConfirmed(r, p.F.CurrentLSN(), 2*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	line := r.WaitLine(`"PostgreSQL failed over`, time.Second)
	for _, want := range []string{fmt.Sprintf(`"old_timeline":%d`, before), fmt.Sprintf(`"timeline":%d`, before+1), `"confirmed_before"`, `"slot_confirmed_lsn"`} {
		if !strings.Contains(line, want) {
			t.Errorf("failover log line %s: want %s in it", line, want)
		}
	}
	rows := p.F.OutboxRows()
	rep := p.F.Verify(rows)
	t.Logf("failover (%s): %d rows on the new primary from %d load rounds (%d cut by the failover); standby promoted %s after the %s, walrelay streaming from it %s after; %s",
		mode, len(rows), rounds, failed, promoted.Round(time.Millisecond), mode, resumed.Round(time.Millisecond), rep)
	// No loss and nothing the new primary lacks. What the synced slot
	// replays, the partitions' tails in Kafka (read on the old timeline,
	// trusted up to where it ended) already hold: resumed from Kafka (the
	// default), a failover publishes no duplicate but an in-doubt write the
	// old session abandoned, which Kafka may append after the new session
	// read the tail. Without it, the slot's lag: 1,493 and 377 of about
	// 56,000 rows on PostgreSQL 17 (docs/RELIABILITY.md).
	harness.AssertClean(t, rep, len(rows)/1000)
	// The new session read the partitions' ends, records of the old
	// timeline, and trusted them up to where that timeline ended: the
	// server's history came over the replication connection.
	want := fmt.Sprintf(`"timeline":%d`, before+1)
	if !slices.ContainsFunc(strings.Split(r.Stderr.String(), "\n"), func(l string) bool {
		return strings.Contains(l, "partition's end in Kafka read") && strings.Contains(l, `"tail_timeline_ended"`) && strings.Contains(l, want)
	}) {
		t.Errorf("no line of the new session's (%s) says it read a partition's end in Kafka and trusted the old timeline's records up to where it ended (tail_timeline_ended)", want)
	}
}

func failoverWithoutFailoverSlotsStops(t *testing.T, mode string) {
	p := harness.NewPair(t, true)
	r, stopLoad := p.StartUnderLoad(t)
	checkReadiness(t, p, "warn")
	time.Sleep(2 * time.Second)
	began, _ := p.Failover(t, mode)
	code := r.Wait(2 * time.Minute)
	stopLoad()
	out := r.Stderr.String()
	t.Logf("walrelay stopped %s after the %s with: %s", time.Since(began).Round(time.Millisecond), mode, lastLine(out))
	if code != 1 {
		t.Errorf("walrelay run exit code after a failover without failover slots: got %d; want 1\n%s", code, out)
	}
	for _, want := range []string{"the replication slot can no longer be streamed", "and confirmed up to ",
		"a new slot would start at the server's current position", "walrelay recover --since 20"} {
		if !strings.Contains(out, want) {
			t.Errorf("walrelay output: want %q in it:\n%s", want, out)
		}
	}
	if strings.Contains(lastLine(out), "(run `walrelay init`)") {
		t.Errorf("last line %q: want no bare advice to run init", lastLine(out))
	}
	// Nothing was created behind the operator's back.
	var n int
	testkit.Must(t, p.Standby.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", p.F.Slot).Scan(&n), "slots")
	if n != 0 {
		t.Errorf("slots named %s on the promoted standby: got %d; want 0", p.F.Slot, n)
	}
}

// checkReadiness runs `walrelay check` on the pair: from 17 on, with the
// standby synchronising the slot, every failover line is ok; before 17
// the slot's failover line and the standby's warn that a failover loses
// the slot.
func checkReadiness(t *testing.T, p *harness.Pair, want string) {
	t.Helper()
	// The check's topic lines come from the outbox rows: wait until the
	// load wrote a row of its explicit topic too, so that the two runs of
	// runCheck (table, JSON) list the same topics.
	poll.Eventually(t, time.Minute, "a row with its own topic in the outbox", func() (string, bool) {
		var n int
		err := p.F.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+schema.QuoteIdentifier(p.F.Table)+" WHERE topic IS NOT NULL").Scan(&n)
		return fmt.Sprintf("%d rows (%v)", n, err), err == nil && n > 0
	})
	_, report := runCheck(t, p.F)
	standby := "standby " + p.Standby.Host()
	lines := []string{"server role", "slot failover", standby}
	if want == "ok" {
		lines = append(lines, "synchronized_standby_slots")
	}
	for _, name := range lines {
		got := report.status(name)
		if name == "server role" && got != "ok" || name != "server role" && got != want {
			t.Errorf("check %q: got %s; want %s", name, got, map[bool]string{true: "ok", false: want}[name == "server role"])
		}
	}
	// Pointed at the standby alone, walrelay refuses it: it streams from
	// the primary.
	onStandby := harness.RoleURL(t, fmt.Sprintf("host=127.0.0.1 port=%d dbname=walrelay sslmode=disable", p.Standby.Port), harness.RelayRole, harness.RelayPassword)
	_, report = runCheck(t, p.F, "--postgres-url", onStandby)
	if got := report.status("server role"); got != "fail" {
		t.Errorf("check on the standby: server role %s; want fail", got)
	}
}
