//go:build faults

package faults

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/faultproxy"
	"github.com/walrelay/walrelay/test/harness"
)

// linkTypes are the aggregate types (topics) of the link and leader tests.
var linkTypes = []string{"order", "customer"}

// linkLoadShape is the load under the link and leader faults: a steady
// trickle of transactions of 1 to 50 rows from 4 writers, in rounds of
// 400 rows, for as long as the test needs.
func linkLoadShape() harness.Load {
	return harness.Load{Writers: 4, Rows: 400, MaxTxRows: 50, AggregatesPerWriter: 10,
		Types: linkTypes, Pause: 20 * time.Millisecond}
}

// linkLoad commits rounds of rows in the background until stopped.
type linkLoad struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	rows     int
	err      error
}

func linkStartLoad(t *testing.T, f *harness.Fixture, l harness.Load) *linkLoad {
	t.Helper()
	ld := &linkLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		for {
			select {
			case <-ld.stop:
				return
			default:
			}
			n, err := f.Write(context.Background(), l)
			ld.rows += n
			if err != nil {
				ld.err = err
				return
			}
		}
	}()
	t.Cleanup(func() { ld.halt() })
	return ld
}

func (ld *linkLoad) halt() {
	ld.stopOnce.Do(func() { close(ld.stop) })
	<-ld.done
}

// Stop ends the load after the round in progress and returns the rows
// committed in all.
func (ld *linkLoad) Stop(t *testing.T) int {
	t.Helper()
	ld.halt()
	testkit.Must(t, ld.err, "write outbox rows")
	return ld.rows
}

// linkSample is the Kafka end offsets and, read after them, the WAL
// position: every record counted in mark belongs to a transaction that
// ended at or before lsn.
type linkSample struct {
	mark harness.Mark
	lsn  pglogrepl.LSN
}

// linkFault is one fault and its in-flight window. base is the last sample
// whose position the slot had confirmed when the fault hit: a replay after
// the fault starts past every record it counts. end is taken once the
// faulted session is gone. Every duplicate the fault can cause is a record
// published between base and end.
type linkFault struct {
	name      string
	mark      harness.Mark // end offsets at the fault
	confirmed pglogrepl.LSN
	base      harness.Mark
	end       harness.Mark
	notes     []string // figures measured after the fault
}

func (fl *linkFault) window() int64 { return fl.end.Records() - fl.base.Records() }

func (fl *linkFault) note(s string) { fl.notes = append(fl.notes, s) }

// linkLedger keeps the samples and faults of one test.
type linkLedger struct {
	t       *testing.T
	f       *harness.Fixture
	samples []linkSample
	faults  []*linkFault
}

func linkNewLedger(t *testing.T, f *harness.Fixture) *linkLedger {
	return &linkLedger{t: t, f: f}
}

func (lg *linkLedger) sample() {
	m := lg.f.Mark()
	lg.samples = append(lg.samples, linkSample{mark: m, lsn: lg.f.CurrentLSN()})
}

// warm lets the load run for d, sampling, while the relays keep running.
func (lg *linkLedger) warm(d time.Duration, relays ...*harness.Relay) {
	lg.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, r := range relays {
			r.Running()
		}
		lg.sample()
		time.Sleep(250 * time.Millisecond)
	}
}

// fault records the moment just before a fault.
func (lg *linkLedger) fault(name string) *linkFault {
	lg.t.Helper()
	fl := &linkFault{name: name, confirmed: lg.f.ConfirmedLSN(), base: harness.Mark{}}
	for _, s := range lg.samples {
		if s.lsn <= fl.confirmed {
			fl.base = s.mark
		}
	}
	fl.mark = lg.f.Mark()
	fl.end = fl.mark
	lg.faults = append(lg.faults, fl)
	return fl
}

// linkStarted counts the replication sessions a relay has started.
func linkStarted(r *harness.Relay) int {
	return strings.Count(r.Stderr.String(), `"replication started"`)
}

// linkWaitSession waits until r has started more than n sessions, and
// returns how long that took.
func linkWaitSession(t *testing.T, r *harness.Relay, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	poll.EventuallyEvery(t, within, 100*time.Millisecond, fmt.Sprintf("a new replication session after the fault (more than %d)", n), func() (string, bool) {
		got := linkStarted(r)
		if got <= n {
			r.Running()
		}
		return fmt.Sprintf("%d sessions started", got), got > n
	})
	return time.Since(start)
}

// linkCatchUp waits until the slot confirms everything committed so far
// and returns how long it took.
func linkCatchUp(t *testing.T, f *harness.Fixture, r *harness.Relay, within time.Duration) (pglogrepl.LSN, time.Duration) {
	t.Helper()
	target := f.CurrentLSN()
	return target, f.WaitConfirmed(r, target, within)
}

// verify checks every committed row against Kafka and reports the figures
// of the test on one line, then each fault with its window. Duplicates
// may not exceed the sum of the windows.
func (lg *linkLedger) verify(committed int) harness.Report {
	t := lg.t
	t.Helper()
	rows := lg.f.OutboxRows()
	if len(rows) != committed {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), committed)
	}
	rep := lg.f.Verify(rows)
	marks := make([]harness.Mark, len(lg.faults))
	var bound int64
	for i, fl := range lg.faults {
		marks[i] = fl.mark
		bound += fl.window()
	}
	perFault, before := rep.ByFault(marks)
	t.Logf("%s: messages %d, faults %d, lost %d, out of order %d, duplicates %d (before the first fault %d; allowed: the windows, %d)",
		t.Name(), rep.Expected, len(lg.faults), len(rep.Lost), len(rep.OutOfOrder), rep.Duplicates, before, bound)
	for i, fl := range lg.faults {
		t.Logf("  fault %d %s: records in Kafka at the fault %d, slot confirmed %s, window %d (records published after the last confirmed sample until the session was gone), duplicates %d; %s",
			i+1, fl.name, fl.mark.Records(), fl.confirmed, fl.window(), perFault[i], strings.Join(fl.notes, ", "))
	}
	harness.AssertClean(t, rep, int(bound))
	return rep
}

// linkProxiedURL is pgURL with its host and port replaced by addr.
func linkProxiedURL(t *testing.T, pgURL, addr string) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	testkit.Must(t, err, "parse %s", pgURL)
	u.Host = addr
	return u.String()
}

// linkPGProxy starts a faultproxy in front of the rig's PostgreSQL.
func linkPGProxy(t *testing.T, f *harness.Fixture) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(f.PGURL)
	testkit.Must(t, err, "parse %s", f.PGURL)
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	p, err := faultproxy.Start("127.0.0.1:0", net.JoinHostPort("127.0.0.1", port))
	testkit.Must(t, err, "start the PostgreSQL proxy")
	t.Cleanup(func() { p.Close() }) //nolint:errcheck // the listener's error does not matter here
	return p, linkProxiedURL(t, f.RelayURL, p.Addr())
}

// linkStable samples fn every 250ms for d and reports the values it saw
// change between (first and last).
func linkStable[T comparable](d time.Duration, r *harness.Relay, fn func() T) (first, last T) {
	first = fn()
	last = first
	for end := time.Now().Add(d); time.Now().Before(end); {
		r.Running()
		time.Sleep(250 * time.Millisecond)
		last = fn()
	}
	return first, last
}

// The relay's PostgreSQL link (preflight, leader lock and replication) runs
// through a proxy. A cut ends the session, and with it the lock, at once:
// the relay must get both back by itself and stream again. A 20s stall
// (longer than the lease, shorter than wal_sender_timeout) must not end the
// process; afterwards the slot catches up. Nothing is lost or reordered.
func TestReplicationLinkCutAndStalled(t *testing.T) {
	parallel(t)
	sc := scale(t)
	f := harness.New(t, linkTypes...)
	proxy, proxied := linkPGProxy(t, f)
	f.WalrelayOK("init")
	r := f.Run("--postgres-url", proxied)
	r.WaitStarted()
	load := linkStartLoad(t, f, linkLoadShape())
	lg := linkNewLedger(t, f)

	for i := 0; i < sc; i++ {
		lg.warm(3*time.Second, r)
		sessions := linkStarted(r)
		fl := lg.fault("pg link cut")
		proxy.Cut()
		time.Sleep(3 * time.Second)
		r.Running()
		proxy.Restore()
		took := linkWaitSession(t, r, sessions, 2*time.Minute)
		fl.end = f.Mark()
		lsn, caught := linkCatchUp(t, f, r, 2*time.Minute)
		fl.note(fmt.Sprintf("new session %s after the cut", (3*time.Second + took).Round(time.Millisecond)))
		fl.note(fmt.Sprintf("caught up with %s %s after that", lsn, caught.Round(time.Millisecond)))
	}

	lg.warm(3*time.Second, r)
	sessions := linkStarted(r)
	fl := lg.fault("pg link stalled")
	proxy.Stall()
	stall := time.Duration(sc) * 20 * time.Second
	first, last := linkStable(stall, r, f.ConfirmedLSN)
	proxy.Restore()
	// The window closes when a new session replaces the stalled one; if
	// the stalled one goes on, it closes once the slot has caught up.
	lsn := f.CurrentLSN()
	restored := time.Now()
	poll.EventuallyEvery(t, 3*time.Minute, 100*time.Millisecond, "a new session or the slot confirmed >= "+lsn.String()+" after the restore", func() (string, bool) {
		got := f.ConfirmedLSN()
		if linkStarted(r) > sessions || got >= lsn {
			return "", true
		}
		r.Running()
		return "slot confirmed " + got.String(), false
	})
	fl.end = f.Mark()
	if linkStarted(r) > sessions {
		fl.note(fmt.Sprintf("a new session %s after the restore", time.Since(restored).Round(time.Millisecond)))
	}
	f.WaitConfirmed(r, lsn, 3*time.Minute)
	caught := time.Since(restored)
	fl.note(fmt.Sprintf("confirmed during the %s stall %s .. %s", stall, first, last))
	fl.note(fmt.Sprintf("caught up with %s %s after the restore", lsn, caught.Round(time.Millisecond)))

	n := load.Stop(t)
	linkCatchUp(t, f, r, 3*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d; want 0", code)
	}
	lg.verify(n)
}

// Kafka runs through a proxy on the rig's PROXIED listener. While Kafka is
// cut off or stalled the relay keeps running and the slot confirms nothing
// beyond what Kafka had acknowledged: once the last acknowledgements before
// the fault are confirmed, neither the confirmed position nor the records in
// Kafka move until the link is back. Then the slot catches up.
func TestKafkaLinkCutAndStalled(t *testing.T) {
	exclusive(t)
	sc := scale(t)
	proxied := rig.Env(t, "WALRELAY_TEST_KAFKA_PROXIED")
	proxyAddr := rig.Env(t, "WALRELAY_TEST_KAFKA_PROXY")
	proxy, err := faultproxy.Start(proxyAddr, proxied)
	testkit.Must(t, err, "start the Kafka proxy at %s", proxyAddr)
	t.Cleanup(func() { proxy.Close() }) //nolint:errcheck // the listener's error does not matter here
	f := harness.New(t, linkTypes...)
	r := f.Start("--kafka-brokers", proxyAddr)
	r.WaitStarted()
	load := linkStartLoad(t, f, linkLoadShape())
	lg := linkNewLedger(t, f)

	outage := func(name string, d time.Duration, begin func()) {
		t.Helper()
		lg.warm(3*time.Second, r)
		fl := lg.fault(name)
		begin()
		// The acknowledgements that were under way when the link went are
		// confirmed at the next status update (1s); then nothing moves.
		const settle = 2 * time.Second
		time.Sleep(settle)
		k1 := f.Mark().Records()
		c1, c2 := linkStable(d-settle, r, f.ConfirmedLSN)
		k2 := f.Mark().Records()
		proxy.Restore()
		if c2 != c1 {
			t.Errorf("%s: slot confirmed moved from %s to %s while Kafka was unreachable; want no movement", name, c1, c2)
		}
		if k2 != k1 {
			t.Errorf("%s: records in Kafka went from %d to %d while the relay's link was down; want no change", name, k1, k2)
		}
		lsn, caught := linkCatchUp(t, f, r, 3*time.Minute)
		fl.end = f.Mark()
		fl.note(fmt.Sprintf("confirmed during the %s outage %s -> %s (settled) -> %s", d, fl.confirmed, c1, c2))
		fl.note(fmt.Sprintf("records in Kafka at the fault %d, settled %d, at the restore %d", fl.mark.Records(), k1, k2))
		fl.note(fmt.Sprintf("caught up with %s %s after the restore", lsn, caught.Round(time.Millisecond)))
	}
	for i := 0; i < sc; i++ {
		outage("kafka link cut", time.Duration(sc)*5*time.Second, proxy.Cut)
	}
	outage("kafka link stalled", time.Duration(sc)*20*time.Second, proxy.Stall)

	n := load.Stop(t)
	linkCatchUp(t, f, r, 3*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d; want 0", code)
	}
	lg.verify(n)
}
