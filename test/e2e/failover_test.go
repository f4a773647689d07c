package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
	"github.com/walrelay/walrelay/test/poll"
)

// pair is a primary and its physical standby, started by the test, with a
// fixture whose connection strings list both servers, primary first, and
// ask for the one that takes writes (target_session_attrs=read-write), as
// users point walrelay at an HA pair.
type pair struct {
	primary, standby *pgserver.Server
	f                *harness.Fixture
}

// newPair starts the pair. On PostgreSQL 17 and later the standby
// synchronises failover slots and the primary holds logical decoding back
// until the standby has the WAL (synchronized_standby_slots).
func newPair(t *testing.T) *pair {
	t.Helper()
	_, brokers := harness.Services(t)
	primary := pgserver.Start(t, pgserver.Settings{"wal_sender_timeout = 10s"})
	standby := primary.Standby(t, "standby1", nil)
	if pgserver.Major() >= 17 {
		primary.Exec(t, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
		primary.Exec(t, "SELECT pg_reload_conf()")
	}
	hosts := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d dbname=walrelay sslmode=disable target_session_attrs=read-write connect_timeout=5",
		primary.Port, standby.Port)
	return &pair{primary: primary, standby: standby, f: harness.NewWith(t, hosts+" user=walrelay", brokers, "order")}
}

// load writes rounds of 1-100-row transactions until ctx ends, two
// writers each pausing 20 ms between its transactions, whichever server is
// primary; a round cut by the failover is cut, not retried.
func (p *pair) load(ctx context.Context, t *testing.T) (wait func() (rounds, failed int)) {
	var wg sync.WaitGroup
	var rounds, failed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rounds++
			l := harness.Load{Writers: 2, Rows: 200, MaxTxRows: 100, AggregatesPerWriter: 5, Types: []string{"order"}, Pause: 20 * time.Millisecond}
			if _, err := p.f.Write(ctx, l); err != nil {
				failed++
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return func() (int, int) { wg.Wait(); return rounds, failed }
}

// syncedSlot waits until the standby holds a persistent, synced copy of the
// fixture's slot: only such a copy survives a promotion.
func (p *pair) syncedSlot(t *testing.T) {
	t.Helper()
	poll.Eventually(t, 90*time.Second, "a persistent synced copy of the slot on the standby", func() (string, bool) {
		var synced, temporary bool
		err := p.standby.QueryRow("SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1", p.f.Slot).Scan(&synced, &temporary)
		return fmt.Sprintf("synced %v, temporary %v (%v)", synced, temporary, err), err == nil && synced && !temporary
	})
}

// On PostgreSQL 17 and later, with a failover slot synchronised to the
// standby and synchronized_standby_slots set, a failover loses nothing and
// publishes nothing the new primary does not have: the primary is killed
// (SIGKILL) mid-load, or stopped for a planned switchover, the standby is
// promoted, and walrelay follows it through the multi-host connection
// string. Every row on the new primary is in Kafka, in order; no record in
// Kafka lacks its row there. Below 17 no slot survives, and walrelay stops
// with where the gap starts instead of creating a new slot.
func TestFailover(t *testing.T) {
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
	p := newPair(t)
	p.f.WalrelayOK("init")
	r := p.f.Run()
	r.WaitStarted()
	ctx, stopLoad := context.WithCancel(context.Background())
	wait := p.load(ctx, t)
	synced := time.Now()
	p.syncedSlot(t)
	t.Logf("the standby had a synced copy of the slot after %s", time.Since(synced).Round(time.Millisecond))
	p.checkReadiness(t, "ok")
	time.Sleep(2 * time.Second) // load streams through walrelay

	before := p.primary.Timeline(t)
	began := time.Now()
	if mode == "kill" {
		p.primary.Kill(t)
	} else {
		p.primary.Stop(t)
	}
	p.standby.Promote(t)
	promoted := time.Since(began)
	r.WaitLine(`"PostgreSQL failed over`, 2*time.Minute)
	resumed := time.Since(began)
	time.Sleep(2 * time.Second) // load streams through the new primary
	stopLoad()
	rounds, failed := wait()

	if after := p.standby.Timeline(t); after != before+1 {
		t.Errorf("timeline of the new primary: got %d; want %d", after, before+1)
	}
	p.f.WaitConfirmed(r, p.f.CurrentLSN(), 2*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	line := r.WaitLine(`"PostgreSQL failed over`, time.Second)
	for _, want := range []string{fmt.Sprintf(`"old_timeline":%d`, before), fmt.Sprintf(`"timeline":%d`, before+1), `"confirmed_before"`, `"slot_confirmed_lsn"`} {
		if !strings.Contains(line, want) {
			t.Errorf("failover log line %s: want %s in it", line, want)
		}
	}
	rows := p.f.OutboxRows()
	rep := p.f.Verify(rows)
	t.Logf("failover (%s): %d rows on the new primary from %d load rounds (%d cut by the failover); standby promoted %s after the %s, walrelay streaming from it %s after; %s",
		mode, len(rows), rounds, failed, promoted.Round(time.Millisecond), mode, resumed.Round(time.Millisecond), rep)
	// No loss and nothing the new primary lacks; duplicates are what was in
	// flight when the primary went.
	harness.AssertClean(t, rep, len(rows))
}

func failoverWithoutFailoverSlotsStops(t *testing.T, mode string) {
	p := newPair(t)
	p.f.WalrelayOK("init")
	r := p.f.Run()
	r.WaitStarted()
	ctx, stopLoad := context.WithCancel(context.Background())
	wait := p.load(ctx, t)
	p.checkReadiness(t, "warn")
	time.Sleep(2 * time.Second)
	began := time.Now()
	if mode == "kill" {
		p.primary.Kill(t)
	} else {
		p.primary.Stop(t)
	}
	p.standby.Promote(t)
	code := r.Wait(2 * time.Minute)
	stopLoad()
	wait()
	out := r.Stderr.String()
	t.Logf("walrelay stopped %s after the %s with: %s", time.Since(began).Round(time.Millisecond), mode, lastLine(out))
	if code != 1 {
		t.Errorf("walrelay run exit code after a failover without failover slots: got %d; want 1\n%s", code, out)
	}
	for _, want := range []string{"the replication slot is gone from the server walrelay reaches now", "and confirmed up to ",
		"walrelay will not create a slot", "docs/RUNBOOK.md, WalrelaySlotLost"} {
		if !strings.Contains(out, want) {
			t.Errorf("walrelay output: want %q in it:\n%s", want, out)
		}
	}
	if strings.Contains(lastLine(out), "(run `walrelay init`)") {
		t.Errorf("last line %q: want no bare advice to run init", lastLine(out))
	}
	// Nothing was created behind the operator's back.
	var n int
	harness.Must(t, p.standby.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", p.f.Slot).Scan(&n), "slots")
	if n != 0 {
		t.Errorf("slots named %s on the promoted standby: got %d; want 0", p.f.Slot, n)
	}
}

// checkReadiness runs `walrelay check` on the pair: from 17 on, with the
// standby synchronising the slot, every failover line is ok; before 17
// the slot's failover line and the standby's warn that a failover loses
// the slot.
func (p *pair) checkReadiness(t *testing.T, want string) {
	t.Helper()
	_, report := runCheck(t, p.f)
	standby := "standby " + p.standby.Host()
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
}
