package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/pgserver"
)

// Pair is a primary and its physical standby, started by the test, with a
// fixture whose connection strings list both servers, primary first, and
// ask for the one that takes writes (target_session_attrs=read-write), as
// users point walrelay at an HA pair.
type Pair struct {
	Primary, Standby *pgserver.Server
	F                *Fixture
}

// NewPair starts the pair and its fixture (topics for aggregate type
// "order"). On PostgreSQL 17 and later the standby synchronises failover
// slots; with syncStandby the primary also holds logical decoding back
// until the standby has the WAL (synchronized_standby_slots).
func NewPair(t *testing.T, syncStandby bool) *Pair {
	t.Helper()
	_, brokers := testkit.Services(t)
	primary := pgserver.Start(t, pgserver.Settings{"wal_sender_timeout = 10s"})
	standby := primary.Standby(t, "standby1", nil)
	if syncStandby && pgserver.Major() >= 17 {
		primary.Exec(t, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
		primary.Exec(t, "SELECT pg_reload_conf()")
	}
	hosts := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d dbname=walrelay sslmode=disable target_session_attrs=read-write connect_timeout=5",
		primary.Port, standby.Port)
	return &Pair{Primary: primary, Standby: standby, F: NewWith(t, hosts+" user=walrelay", brokers, "order")}
}

// StartUnderLoad runs `walrelay init` and `walrelay run` on the pair,
// waits until the relay streams, and starts Load; stop ends the load and
// returns its rounds and the rounds the failover cut.
func (p *Pair) StartUnderLoad(t *testing.T) (r *Relay, stop func() (rounds, failed int)) {
	t.Helper()
	p.F.WalrelayOK("init")
	r = p.F.Run()
	r.WaitStarted()
	ctx, cancel := context.WithCancel(context.Background())
	wait := p.Load(ctx)
	return r, func() (int, int) { cancel(); return wait() }
}

// Load writes rounds of 1-100-row transactions until ctx ends, two
// writers each pausing 20 ms between its transactions, whichever server is
// primary; a round cut by the failover is cut, not retried. wait returns
// the rounds written and how many of them failed.
func (p *Pair) Load(ctx context.Context) (wait func() (rounds, failed int)) {
	return p.F.LoadUntil(ctx, Load{Writers: 2, Rows: 200, MaxTxRows: 100, AggregatesPerWriter: 5, Types: []string{"order"}, Pause: 20 * time.Millisecond})
}

// SyncedSlot waits until the standby holds a persistent, synced copy of the
// fixture's slot: only such a copy survives a promotion.
func (p *Pair) SyncedSlot(t *testing.T) time.Duration {
	t.Helper()
	began := time.Now()
	poll.Eventually(t, 90*time.Second, "a persistent synced copy of the slot on the standby", func() (string, bool) {
		var synced, temporary bool
		err := p.Standby.QueryRow("SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1", p.F.Slot).Scan(&synced, &temporary)
		return fmt.Sprintf("synced %v, temporary %v (%v)", synced, temporary, err), err == nil && synced && !temporary
	})
	return time.Since(began)
}

// Failover ends the primary (mode kill: SIGKILL; switchover: a fast
// stop) and promotes the standby; it returns how long the promotion took
// from the primary's end.
func (p *Pair) Failover(t *testing.T, mode string) (began time.Time, promoted time.Duration) {
	t.Helper()
	began = time.Now()
	switch mode {
	case "kill":
		p.Primary.Kill(t)
	case "switchover":
		p.Primary.Stop(t)
	default:
		t.Fatalf("failover mode %q: want kill or switchover", mode)
	}
	p.Standby.Promote(t)
	return began, time.Since(began)
}
