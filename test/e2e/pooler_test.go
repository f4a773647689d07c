package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/harness"
)

// pooledURL is the rig's PgBouncer database of mode ("TX" or "SESSION")
// as the URL an application through it uses: pgx's exec mode, as pgx
// documents for PgBouncer, since the fixture's own pool writes through it.
func pooledURL(t *testing.T, mode string) string {
	t.Helper()
	u := rig.Env(t, "WALRELAY_TEST_PGBOUNCER_"+mode+"_URL")
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "default_query_exec_mode=exec"
}

// A transaction pooler's URL alone carries walrelay's SQL, not the
// replication stream: init and check refuse it, naming --replication-url,
// and init creates nothing (no slot, none of walrelay's tables).
func TestPooledURLAloneIsRefusedCreatingNothing(t *testing.T) {
	t.Parallel()
	f := harness.NewWith(t, pooledURL(t, "TX"), rig.KafkaBrokers(t), "order")
	before := walrelayTables(t, f)

	stdout, stderr, code := f.Walrelay("init")
	out := stdout + stderr
	if code == 0 || !strings.Contains(out, "refused by a connection pooler") || !strings.Contains(out, "--replication-url") {
		t.Errorf("init through a transaction pooler: exit %d\n%s\nwant a refusal naming --replication-url", code, out)
	}
	if strings.Contains(out, "stmtcache_") || strings.Contains(out, "already exists (SQLSTATE 42P05)") {
		t.Errorf("init through a transaction pooler tripped on prepared statements:\n%s", out)
	}
	var slots int
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&slots), "count slots")
	if slots != 0 {
		t.Errorf("init made slot %s although it refused; want nothing created", f.Slot)
	}
	if after := walrelayTables(t, f); after != before {
		t.Errorf("walrelay's tables before init %q, after %q; want nothing created", before, after)
	}

	stdout, stderr, code = f.Walrelay("check", "--json")
	report := parseCheck(t, stdout)
	c := findCheck(report, "role replication")
	if code == 0 || c.Status != "fail" || !strings.Contains(c.Found, "refused by a connection pooler") || !strings.Contains(c.Fix, "--replication-url") {
		t.Errorf("check through a transaction pooler: exit %d, role replication %+v\n%s%s\nwant the pooler's refusal naming --replication-url", code, c, stdout, stderr)
	}
	// The SQL rules read their facts through the pooler like any other.
	for _, name := range []string{"wal_level", "outbox table", "table columns", "publication table", "database connect"} {
		if s := report.status(name); s != "ok" {
			t.Errorf("check %s through the pooler: %s; want ok (its SQL works through a transaction pooler)", name, s)
		}
	}
}

// walrelayTables lists the fixture's tables (the outbox and walrelay's own
// beside it), as one string.
func walrelayTables(t *testing.T, f *harness.Fixture) string {
	t.Helper()
	var names string
	testkit.Must(t, f.DB.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(relname, ',' ORDER BY relname), '') FROM pg_class WHERE relname LIKE $1 AND relkind IN ('r', 'p')`,
		f.Table+"%").Scan(&names), "list tables")
	return names
}

// walrelay's SQL through a transaction pooler, the replication stream and
// the leader's lock on the direct endpoint (--replication-url): under
// writers that also go through the pooler, two relays elect one leader,
// the leader is killed with SIGKILL and the standby takes over. Every row
// arrives, each aggregate in commit order, and the two never lead at once.
func TestPooledSQLWithDirectReplicationSurvivesALeaderKill(t *testing.T) {
	t.Parallel()
	f := harness.NewWith(t, pooledURL(t, "TX"), rig.KafkaBrokers(t), "order", "customer")
	direct := harness.RoleURL(t, rig.PGURL(t), harness.RelayRole, harness.RelayPassword)
	flags := []string{"--replication-url", direct}
	f.WalrelayOK("init", flags...)
	// Every check reads its facts through the pooler (the symptom was
	// "prepared statement ... already exists" in every rule) and passes.
	stdout, stderr, code := f.Walrelay("check", append([]string{"--json"}, flags...)...)
	if report := parseCheck(t, stdout); code != 0 || report.Fail != 0 {
		t.Fatalf("check with the pooled SQL URL and a direct --replication-url: exit %d, %d failed\n%s%s", code, report.Fail, stdout, stderr)
	}
	type node struct {
		name, metrics string
		r             *harness.Relay
	}
	start := func(name string) *node {
		n := &node{name: name, metrics: testkit.FreePort(t)}
		n.r = f.Run(append([]string{"--metrics-addr", n.metrics}, flags...)...)
		return n
	}
	a, b := start("a"), start("b")

	// Watch walrelay_leader on both throughout: never both 1.
	var both atomic.Int32
	watch, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Err() == nil {
			if harness.Scrape(a.metrics, "walrelay_leader") == 1 && harness.Scrape(b.metrics, "walrelay_leader") == 1 {
				both.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var lead, standby *node
	poll.EventuallyEvery(t, 90*time.Second, 100*time.Millisecond, "one leader", func() (string, bool) {
		a.r.Running()
		b.r.Running()
		la, lb := harness.Scrape(a.metrics, "walrelay_leader"), harness.Scrape(b.metrics, "walrelay_leader")
		switch {
		case la == 1 && lb == 0:
			lead, standby = a, b
		case la == 0 && lb == 1:
			lead, standby = b, a
		}
		return fmt.Sprintf("walrelay_leader a=%v b=%v", la, lb), lead != nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := f.LoadUntil(ctx, harness.Load{Writers: 3, Rows: 200, MaxTxRows: 20, AggregatesPerWriter: 8,
		Types: []string{"order", "customer"}, Pause: 20 * time.Millisecond})
	before := f.ConfirmedLSN()
	poll.EventuallyEvery(t, time.Minute, 50*time.Millisecond, "the leader confirming under load", func() (string, bool) {
		lead.r.Running()
		return "confirmed_flush_lsn still " + before.String(), f.ConfirmedLSN() > before
	})
	lead.r.Kill()
	killed := f.ConfirmedLSN()
	poll.EventuallyEvery(t, 90*time.Second, 100*time.Millisecond, "the standby leading and confirming", func() (string, bool) {
		standby.r.Running()
		return fmt.Sprintf("%s: walrelay_leader %v, confirmed %s", standby.name, harness.Scrape(standby.metrics, "walrelay_leader"), f.ConfirmedLSN()),
			harness.Scrape(standby.metrics, "walrelay_leader") == 1 && f.ConfirmedLSN() > killed
	})
	time.Sleep(time.Second) // writes after the takeover, through the pooler
	cancel()
	// The round the cancel cuts is the only one that may fail.
	if rounds, failed := wait(); failed > 1 || rounds < 2 {
		t.Fatalf("writers through the pooler: %d rounds, %d failed; want every round but the cut one to commit", rounds, failed)
	}
	f.WaitConfirmed(standby.r, f.CurrentLSN(), 2*time.Minute)
	stopWatch()
	<-watched
	if n := both.Load(); n != 0 {
		t.Errorf("both relays reported walrelay_leader 1 in %d samples; want never", n)
	}
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 1<<30) // a kill replays: duplicates are allowed here
	if code := standby.r.Stop(); code != 0 {
		t.Errorf("standby exit code after SIGTERM = %d; want 0", code)
	}
}
