//go:build faults

package faults

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// leaderTakeoverBound is the bound on a takeover with the default
// leader settings after a kill -9 or a cut network.
const leaderTakeoverBound = 15 * time.Second

// leaderSilentBound bounds a takeover after a silent network loss, which
// the server notices only through the lock session's TCP settings.
const leaderSilentBound = 20 * time.Second

// leaderNode is one `walrelay run` of a leader test with its metrics
// address.
type leaderNode struct {
	name    string
	r       *harness.Relay
	metrics string
	flags   []string
}

// leaderStart runs a relay; init runs `walrelay init` first.
func leaderStart(t *testing.T, f *harness.Fixture, name string, init bool, flags ...string) *leaderNode {
	t.Helper()
	n := &leaderNode{name: name, metrics: testkit.FreePort(t)}
	n.flags = append([]string{"--metrics-addr", n.metrics}, flags...)
	if init {
		n.r = f.Start(n.flags...)
	} else {
		n.r = f.Run(n.flags...)
	}
	return n
}

// restart runs the node's relay again with the same flags and address.
func (n *leaderNode) restart(f *harness.Fixture) {
	n.r = f.Run(n.flags...)
}

// stop sends SIGTERM and waits for the exit code; unlike Relay.Stop it
// does not wait for replication first, which a standby never starts.
func (n *leaderNode) stop(t *testing.T) {
	t.Helper()
	testkit.Must(t, n.r.Cmd.Process.Signal(syscall.SIGTERM), "signal %s", n.name)
	if code := n.r.Wait(90 * time.Second); code != 0 {
		t.Errorf("%s: exit code after SIGTERM = %d; want 0", n.name, code)
	}
}

// leading is the node's walrelay_leader: 1, 0, or -1 when unreachable.
func (n *leaderNode) leading() float64 { return harness.Scrape(n.metrics, "walrelay_leader") }

// published sums walrelay_published_messages_total over its topics; -1
// when the metrics cannot be read.
func (n *leaderNode) published() float64 {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "walrelay_published_messages_total{") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// leaderWait waits until node reports walrelay_leader want.
func leaderWait(t *testing.T, n *leaderNode, want float64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	poll.EventuallyEvery(t, within, 100*time.Millisecond, fmt.Sprintf("%s: walrelay_leader = %v", n.name, want), func() (string, bool) {
		got := n.leading()
		if got != want {
			n.r.Running()
		}
		return fmt.Sprintf("%s: walrelay_leader = %v; walrelay output:\n%s", n.name, got, n.r.Stderr.String()), got == want
	})
	return time.Since(start)
}

// leaderFind waits until exactly one node leads and every other one is a
// standby, and returns the leader and the standby.
func leaderFind(t *testing.T, a, b *leaderNode) (lead, standby *leaderNode) {
	t.Helper()
	poll.EventuallyEvery(t, 90*time.Second, 100*time.Millisecond, "a single leader", func() (string, bool) {
		a.r.Running()
		b.r.Running()
		la, lb := a.leading(), b.leading()
		switch {
		case la == 1 && lb == 0:
			lead, standby = a, b
		case la == 0 && lb == 1:
			lead, standby = b, a
		}
		return fmt.Sprintf("%s walrelay_leader = %v, %s = %v", a.name, la, b.name, lb), lead != nil
	})
	return lead, standby
}

// leaderTakeover measures, from since, how long it takes until n reports
// walrelay_leader 1 and until the slot confirms past confirmed; it gives
// up after within (zero durations then). onWait runs at every poll.
func leaderTakeover(t *testing.T, f *harness.Fixture, n *leaderNode, since time.Time, confirmed pglogrepl.LSN, within time.Duration) (leads, moves time.Duration) {
	t.Helper()
	poll.Until(time.Until(since.Add(within)), 100*time.Millisecond, func() bool {
		n.r.Running()
		if leads == 0 && n.leading() == 1 {
			leads = time.Since(since)
		}
		if leads != 0 && f.ConfirmedLSN() > confirmed {
			moves = time.Since(since)
			return true
		}
		return false
	})
	return leads, moves
}

// leaderCheckBound fails the test unless both measures exist and are
// within bound.
func leaderCheckBound(t *testing.T, what string, leads, moves, bound time.Duration) {
	t.Helper()
	switch {
	case leads == 0:
		t.Errorf("%s: the standby did not report walrelay_leader 1 in time; want a takeover within %s", what, bound)
	case moves == 0:
		t.Errorf("%s: the new leader's slot confirmed did not move in time; want within %s", what, bound)
	case moves > bound:
		t.Errorf("%s: takeover took %s (leader after %s); want under %s", what, moves.Round(time.Millisecond), leads.Round(time.Millisecond), bound)
	}
}

// leaderQuiet checks that a deposed leader publishes nothing for d: its
// published counter does not move, and it is a standby or exited with an
// error.
func leaderQuiet(t *testing.T, n *leaderNode, d time.Duration) (before, after float64) {
	t.Helper()
	before = n.published()
	time.Sleep(d)
	after = n.published()
	if n.r.Exited() {
		if code := n.r.Wait(time.Second); code == 0 {
			t.Errorf("%s: the deposed leader exited with code 0; want a standby or a non-zero exit", n.name)
		}
		return before, before
	}
	if after != before {
		t.Errorf("%s: walrelay_published_messages_total went from %v to %v after it lost leadership; want no change", n.name, before, after)
	}
	if l := n.leading(); l != 0 {
		t.Errorf("%s: walrelay_leader = %v after it lost leadership; want 0", n.name, l)
	}
	return before, after
}

// Two relays on one slot with the default leader settings. The leader is
// killed with SIGKILL under load, 2*scale times; each time the standby
// must lead and move the slot's confirmed position within 15s, and the
// killed one comes back as the new standby.
func TestLeaderKilledUnderLoad(t *testing.T) {
	parallel(t)
	sc := scale(t)
	f := harness.New(t, linkTypes...)
	a := leaderStart(t, f, "A", true)
	leaderWait(t, a, 1, 90*time.Second)
	a.r.WaitStarted()
	b := leaderStart(t, f, "B", false)
	leaderWait(t, b, 0, 90*time.Second)
	load := linkStartLoad(t, f, linkLoadShape())
	lg := linkNewLedger(t, f)

	for i := 0; i < 2*sc; i++ {
		lead, standby := leaderFind(t, a, b)
		lg.warm(3*time.Second, a.r, b.r)
		fl := lg.fault("kill -9 leader " + lead.name)
		killed := time.Now()
		lead.r.Kill()
		leads, moves := leaderTakeover(t, f, standby, killed, fl.confirmed, time.Minute)
		fl.end = f.Mark()
		fl.note(fmt.Sprintf("%s leads after %s, slot confirmed moves after %s", standby.name, leads.Round(time.Millisecond), moves.Round(time.Millisecond)))
		leaderCheckBound(t, fl.name, leads, moves, leaderTakeoverBound)
		if t.Failed() {
			break
		}
		lead.restart(f)
		leaderWait(t, lead, 0, 90*time.Second)
	}

	n := load.Stop(t)
	lead, standby := leaderFind(t, a, b)
	linkCatchUp(t, f, lead.r, 3*time.Minute)
	standby.stop(t)
	lead.stop(t)
	lg.verify(n)
}

// The leader is stopped with SIGSTOP for longer than its lease (3s) plus a
// takeover. The standby must take over while it sleeps; woken with
// SIGCONT, the old leader must publish nothing more and step down (or
// exit with an error).
func TestLeaderPausedPastItsLease(t *testing.T) {
	parallel(t)
	sc := scale(t)
	f := harness.New(t, linkTypes...)
	lease := []string{"--leader-lease", "3s"}
	a := leaderStart(t, f, "A", true, lease...)
	leaderWait(t, a, 1, 90*time.Second)
	a.r.WaitStarted()
	b := leaderStart(t, f, "B", false, lease...)
	leaderWait(t, b, 0, 90*time.Second)
	load := linkStartLoad(t, f, linkLoadShape())
	lg := linkNewLedger(t, f)

	for i := 0; i < sc; i++ {
		lead, standby := leaderFind(t, a, b)
		lg.warm(3*time.Second, a.r, b.r)
		lostBefore := strings.Count(lead.r.Stderr.String(), `"leadership lost"`)
		p0 := lead.published()
		fl := lg.fault("SIGSTOP leader " + lead.name)
		paused := time.Now()
		lead.r.Pause()
		const pause = 20 * time.Second
		leads, moves := leaderTakeover(t, f, standby, paused, fl.confirmed, pause)
		fl.end = f.Mark()
		time.Sleep(time.Until(paused.Add(pause)))
		lead.r.Resume()
		woke := time.Now()
		fl.note(fmt.Sprintf("during the %s pause %s leads after %s, slot confirmed moves after %s", pause, standby.name, leads.Round(time.Millisecond), moves.Round(time.Millisecond)))
		leaderCheckBound(t, fl.name+" (takeover while paused)", leads, moves, pause)
		if leads == 0 || moves == 0 {
			l2, m2 := leaderTakeover(t, f, standby, woke, fl.confirmed, time.Minute)
			fl.end = f.Mark()
			fl.note(fmt.Sprintf("after the wake %s leads after %s, slot confirmed moves after %s", standby.name, l2.Round(time.Millisecond), m2.Round(time.Millisecond)))
		}
		// Acknowledgements of requests sent before the pause may still be
		// counted on wake; after that the counter must stand still.
		time.Sleep(2 * time.Second)
		p1, p2 := leaderQuiet(t, lead, 5*time.Second)
		lost := strings.Count(lead.r.Stderr.String(), `"leadership lost"`) - lostBefore
		fl.note(fmt.Sprintf("%s published %v before the pause, %v 2s after the wake, %v 5s later; 'leadership lost' logged %d times since", lead.name, p0, p1, p2, lost))
		if lost < 1 && !lead.r.Exited() {
			t.Errorf("%s: no \"leadership lost\" in its log after the wake", lead.name)
		}
	}

	n := load.Stop(t)
	lead, standby := leaderFind(t, a, b)
	linkCatchUp(t, f, lead.r, 3*time.Minute)
	standby.stop(t)
	lead.stop(t)
	lg.verify(n)
}

// The leader's PostgreSQL traffic (lock and replication) runs through a
// proxy; the standby connects directly. A cut (the server sees a reset)
// must hand leadership to the standby within 15s; a stall (the network
// goes silent) within 20s, through the lock session's keepalive and
// tcp_user_timeout. Either way the old leader publishes nothing more, also
// after the link is restored.
func TestLeaderLosesNetwork(t *testing.T) {
	parallel(t)
	f := harness.New(t, linkTypes...)
	proxy, proxied := linkPGProxy(t, f)
	a := leaderStart(t, f, "A", true, "--postgres-url", proxied)
	leaderWait(t, a, 1, 90*time.Second)
	a.r.WaitStarted()
	b := leaderStart(t, f, "B", false)
	leaderWait(t, b, 0, 90*time.Second)
	load := linkStartLoad(t, f, linkLoadShape())
	lg := linkNewLedger(t, f)

	phase := func(name string, bound time.Duration, begin func()) {
		t.Helper()
		lg.warm(3*time.Second, a.r, b.r)
		fl := lg.fault(name)
		at := time.Now()
		begin()
		leads, moves := leaderTakeover(t, f, b, at, fl.confirmed, bound+10*time.Second)
		fl.end = f.Mark()
		fl.note(fmt.Sprintf("B leads after %s, slot confirmed moves after %s", leads.Round(time.Millisecond), moves.Round(time.Millisecond)))
		leaderCheckBound(t, name, leads, moves, bound)
		// A's lease (5s) has certainly run out by now: from here on it
		// must not publish, neither while cut off nor once restored.
		time.Sleep(time.Until(at.Add(6 * time.Second)))
		p0 := a.published()
		time.Sleep(2 * time.Second)
		p1 := a.published()
		if p1 != p0 {
			t.Errorf("%s: A's walrelay_published_messages_total went from %v to %v while it was cut off past its lease; want no change", name, p0, p1)
		}
		proxy.Restore()
		if b.leading() != 1 {
			// Without a takeover (reported above) A may rightly win the
			// lock again once its link is back.
			fl.note(fmt.Sprintf("A published %v 6s after the fault, %v 2s later; B did not take over, so A may lead again after the restore", p0, p1))
			return
		}
		_, p2 := leaderQuiet(t, a, 5*time.Second)
		fl.note(fmt.Sprintf("A published %v 6s after the fault, %v 2s later, %v 5s after the restore", p0, p1, p2))
	}
	phase("pg link of leader A cut", leaderTakeoverBound, proxy.Cut)

	// Make A, behind the proxy, the leader again: B steps down by SIGTERM.
	b.stop(t)
	leaderWait(t, a, 1, time.Minute)
	b.restart(f)
	leaderWait(t, b, 0, 90*time.Second)
	phase("pg link of leader A stalled", leaderSilentBound, proxy.Stall)

	n := load.Stop(t)
	lead, standby := leaderFind(t, a, b)
	linkCatchUp(t, f, lead.r, 3*time.Minute)
	standby.stop(t)
	lead.stop(t)
	lg.verify(n)
}
