//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/harness"
)

// The outage tests: Kafka paused or killed for a minute, PostgreSQL
// restarted, all under a steady load, with one relay process that must ride
// it out by itself.

const (
	// outageMaxInFlight is --max-in-flight-messages: small, so that the
	// sink reaches its bound early in a Kafka outage and the memory check
	// measures the bounded state, not a growing one.
	outageMaxInFlight = 2000
	// outageRSSLimit is a generous ceiling for the relay's resident memory
	// (a -race build) while Kafka is down.
	outageRSSLimit = 300 << 20
	// outageCatchUp bounds the catch-up after a fault.
	outageCatchUp = 3 * time.Minute
	// outageSettle is how long the confirmed position may still move after
	// Kafka stopped: acknowledgements the relay received just before the
	// stop reach the slot with the next status update (every second here).
	outageSettle = 3 * time.Second
	// outageTimeoutLog is what PostgreSQL logs when a walsender went silent
	// for wal_sender_timeout.
	outageTimeoutLog = "terminating walsender process due to replication timeout"
)

var outageTypes = []string{"order", "customer"}

// outageLength is the Kafka outage: 60 s times the chaos scale, at most 5
// minutes.
func outageLength(t *testing.T) time.Duration {
	return min(time.Duration(scale(t))*time.Minute, 5*time.Minute)
}

// TestKafkaPausedUnderLoad freezes the broker (SIGSTOP) for the outage and
// lets it go on (SIGCONT): connections stay open and requests time out.
func TestKafkaPausedUnderLoad(t *testing.T) {
	exclusive(t)
	var pid int
	outageKafka(t, "SIGSTOP",
		func(t *testing.T) {
			pid = rig.KafkaPid(t)
			testkit.Must(t, syscall.Kill(pid, syscall.SIGSTOP), "SIGSTOP kafka")
			// Never leave the shared broker frozen behind a failed test.
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) //nolint:errcheck // may be running already
		},
		func(t *testing.T) { testkit.Must(t, syscall.Kill(pid, syscall.SIGCONT), "SIGCONT kafka") })
}

// TestKafkaKilledUnderLoad kills the broker (SIGKILL) and starts it again
// after the outage: connections are refused meanwhile.
func TestKafkaKilledUnderLoad(t *testing.T) {
	exclusive(t)
	outageKafka(t, "SIGKILL",
		func(t *testing.T) {
			pid := rig.KafkaPid(t)
			testkit.Must(t, syscall.Kill(pid, syscall.SIGKILL), "SIGKILL kafka")
			t.Cleanup(func() {
				if out, err := outageRigScript("kafka.sh", "start"); err != nil {
					t.Logf("restart kafka in cleanup: %v\n%s", err, out)
				}
			})
			outageWaitGone(t, pid)
		},
		func(t *testing.T) { rig.Script(t, "kafka.sh", "start") })
}

// outageKafka runs the Kafka outage scenario: steady load, stop Kafka with
// stop, watch the relay for the outage, start Kafka with start, then check
// the catch-up and every message.
func outageKafka(t *testing.T, fault string, stop, start func(t *testing.T)) {
	began := time.Now()
	pgLog := outagePGLogFrom(t)
	f := harness.New(t, outageTypes...)
	metrics := testkit.FreePort(t)
	// The fixture already passes --status-interval 1s.
	r := f.Start("--metrics-addr", metrics, "--slot-poll-interval", "1s", "--max-in-flight-messages", fmt.Sprint(outageMaxInFlight))
	r.WaitStarted()
	sampler := startMetricSampler(t, metrics, time.Second)

	load := outageStartLoad(f)
	defer load.stop() // a failed test must not leave writers running
	// Long enough for the metrics' figures before the outage.
	outageWaitProgress(t, f, r, 15*time.Second)

	mark := f.Mark()
	w := outageWindow{records: mark.Records(), committed: outageCount(t, f), confirmed: f.ConfirmedLSN()}
	sender := outageWalsender(t, f)
	sampler.setPhase(phaseDuring)
	faultAt := time.Now()
	stop(t)
	t.Logf("%s: kafka stopped at %s (%d records in Kafka, %d rows committed, slot confirmed %s)",
		fault, faultAt.Format(time.TimeOnly), w.records, w.committed, w.confirmed)

	watch := outageWatch(t, f, r, metrics, sender, outageLength(t))

	restartAt := time.Now()
	sampler.setPhase(phaseAfter)
	start(t)
	back := time.Now()
	time.Sleep(5 * time.Second) // the load goes on a little after the outage
	wrote, err := load.stop()
	testkit.Must(t, err, "write outbox rows")
	end := f.CurrentLSN()
	sinceLoad := f.WaitConfirmed(r, end, outageCatchUp)
	catchUp := time.Since(back)
	// The slot's figures are read every second: a few more samples show
	// the catch-up.
	sampler.waitFor(back, 30*time.Second, outageRecovered)
	samples, failed := sampler.stop()
	checkOutageMetrics(t, fault, samples, failed, outageTimes{down: faultAt, restart: restartAt, back: back}, watch.length)
	retries := harness.Scrape(metrics, "walrelay_sink_retries_total")
	outageNoTimeoutInLog(t, pgLog)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0", code)
	}
	if n := strings.Count(r.Stderr.String(), `"replication started"`); n != 1 {
		t.Errorf("the relay started replication %d times; want 1 (a Kafka outage must not end the session)", n)
	}
	outageRetriesGrew(t, fault, r.Stderr.String())
	outageNoDeadLetters(t, f)

	rows := f.OutboxRows()
	rep := f.Verify(rows)
	perFault, before := rep.ByFault([]harness.Mark{mark})
	t.Logf("%s: outage %s; %d rows committed (%d by clean commits); %d messages delivered; lost %d, out of order %d, duplicates %d (%d attributed to the fault, %d before it); window at the fault: %d records in Kafka, %d rows committed, slot confirmed %s; sink retries %.0f; kafka answering %s after it was let go on; caught up with %s %s after kafka was back (the load ran 5s of that; %s after it stopped); test %s",
		fault, watch.length.Round(time.Second), len(rows), wrote, rep.Delivered, len(rep.Lost), len(rep.OutOfOrder), rep.Duplicates,
		perFault[0], before, w.records, w.committed, w.confirmed, retries, back.Sub(restartAt).Round(time.Millisecond), end,
		catchUp.Round(time.Millisecond), sinceLoad.Round(time.Millisecond), time.Since(began).Round(time.Second))
	t.Logf("%s: while kafka was down: relay RSS min %d MiB max %d MiB; sink in flight max %d; slot confirmed held at %s (moved %d bytes in the first %s); walsender %d replied last %s before each poll at most",
		fault, watch.rssMin>>20, watch.rssMax>>20, watch.inFlightMax, watch.held, watch.held-w.confirmed, outageSettle, sender.pid, watch.staleMax.Round(time.Millisecond))
	if before != 0 {
		t.Errorf("%d duplicates before the fault; want 0", before)
	}
	// Only the sink's retries repeat messages here (the session never
	// ends): each retry re-sends one partition batch, which holds at most
	// the in-flight bound.
	harness.AssertClean(t, rep, int(max(retries, 0))*outageMaxInFlight)
}

// outageRetriesGrew checks the sink's retry log: a transient outage is
// retried with backoff whose ceiling doubles (full jitter: each delay is
// drawn below it), so later attempts wait longer than the first ones.
func outageRetriesGrew(t *testing.T, fault, stderr string) {
	t.Helper()
	var early, late time.Duration // the longest delay of attempts 1-2, and of attempts 4 and later
	maxAttempt := 0
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, `"produce failed, retrying the batch"`) {
			continue
		}
		var l struct {
			Attempt int     `json:"attempt"`
			Backoff float64 `json:"backoff"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("retry log line %q: %v", line, err)
		}
		d := time.Duration(l.Backoff * float64(time.Second))
		maxAttempt = max(maxAttempt, l.Attempt)
		switch {
		case l.Attempt <= 2:
			early = max(early, d)
		case l.Attempt >= 4:
			late = max(late, d)
		}
	}
	t.Logf("%s: produce retries reached attempt %d; longest delay %s in attempts 1-2, %s from attempt 4 on", fault, maxAttempt, early, late)
	if maxAttempt < 4 || late <= early {
		t.Errorf("%s: retries reached attempt %d with delays %s (attempts 1-2) and %s (attempt 4 on); want growing delays over at least 4 attempts", fault, maxAttempt, early, late)
	}
}

// outageNoDeadLetters checks that a transient outage parked nothing.
func outageNoDeadLetters(t *testing.T, f *harness.Fixture) {
	t.Helper()
	var n int
	err := f.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+f.Table+"_dead_letters").Scan(&n)
	testkit.Must(t, err, "count dead letters")
	if n != 0 {
		t.Errorf("%d dead letters after a Kafka outage; want 0 (an outage is transient)", n)
	}
}

// outageWindow is what was in flight when a fault hit.
type outageWindow struct {
	records   int64         // records in Kafka (end offsets)
	committed int           // rows in the outbox table
	confirmed pglogrepl.LSN // the slot's confirmed position
}

// outageWatched is what outageWatch saw while Kafka was down.
type outageWatched struct {
	length         time.Duration
	held           pglogrepl.LSN // the confirmed position after the settle time
	rssMin, rssMax int64
	inFlightMax    int
	staleMax       time.Duration // the longest the walsender had not heard from the relay
}

// outageWatch polls every second for length while Kafka is down: the relay
// runs, the slot's confirmed position holds, the walsender keeps hearing from
// the relay, memory stays bounded.
func outageWatch(t *testing.T, f *harness.Fixture, r *harness.Relay, metrics string, sender outageSender, length time.Duration) outageWatched {
	t.Helper()
	start := time.Now()
	w := outageWatched{held: f.ConfirmedLSN(), rssMin: 1 << 62}
	pid := r.Cmd.Process.Pid
	moved := false
	for tick := time.NewTicker(time.Second); time.Since(start) < length; <-tick.C {
		r.Running()
		rss, err := harness.RSS(pid)
		testkit.Must(t, err, "relay RSS")
		w.rssMin, w.rssMax = min(w.rssMin, rss), max(w.rssMax, rss)
		w.inFlightMax = max(w.inFlightMax, int(harness.Scrape(metrics, "walrelay_sink_in_flight_messages")))
		got := f.ConfirmedLSN()
		switch {
		case time.Since(start) < outageSettle:
			w.held = max(w.held, got)
		case got > w.held && !moved:
			moved = true
			t.Errorf("slot confirmed %s while Kafka was down (%s into the outage); want at most %s, the position when it stopped",
				got, time.Since(start).Round(time.Second), w.held)
		}
		now := outageWalsender(t, f)
		if now.pid != sender.pid {
			t.Fatalf("walsender pid %d; want %d: the server dropped the relay's replication connection while Kafka was down", now.pid, sender.pid)
		}
		w.staleMax = max(w.staleMax, now.stale)
	}
	w.length = time.Since(start)
	if end := outageWalsender(t, f); !end.first.After(sender.first) {
		t.Errorf("walsender reply_time %s at the end of the outage; want later than %s at its start", end.first, sender.first)
	}
	if w.rssMax >= outageRSSLimit {
		t.Errorf("relay RSS reached %d MiB while Kafka was down; want under %d MiB", w.rssMax>>20, outageRSSLimit>>20)
	}
	if w.inFlightMax != outageMaxInFlight {
		t.Errorf("sink in flight at most %d while Kafka was down; want exactly the bound %d (reached, never passed)", w.inFlightMax, outageMaxInFlight)
	}
	return w
}

// outageSender is the relay's walsender as pg_stat_replication shows it.
type outageSender struct {
	pid   int32
	first time.Time     // reply_time
	stale time.Duration // now() - reply_time on the server
}

func outageWalsender(t *testing.T, f *harness.Fixture) outageSender {
	t.Helper()
	var s outageSender
	var reply *time.Time
	var stale *time.Duration
	err := f.DB.QueryRow(context.Background(), `SELECT r.pid, r.reply_time, now() - r.reply_time
		FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, f.Slot).
		Scan(&s.pid, &reply, &stale)
	testkit.Must(t, err, "read pg_stat_replication for slot %s", f.Slot)
	if reply == nil || stale == nil {
		t.Fatalf("walsender %d of slot %s has no reply_time: the relay never answered", s.pid, f.Slot)
	}
	s.first, s.stale = *reply, *stale
	return s
}

// outageWaitGone waits until the process pid no longer exists.
func outageWaitGone(t *testing.T, pid int) {
	t.Helper()
	poll.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("kafka (pid %d) gone after SIGKILL", pid), func() (string, bool) {
		return "it still exists", syscall.Kill(pid, 0) != nil
	})
}

// outageWaitProgress lets the load run for at least d and until the slot
// confirmed something of it: the relay is in its steady state.
func outageWaitProgress(t *testing.T, f *harness.Fixture, r *harness.Relay, d time.Duration) {
	t.Helper()
	from := f.ConfirmedLSN()
	start := time.Now()
	poll.EventuallyEvery(t, 2*time.Minute, 200*time.Millisecond, fmt.Sprintf("at least %s of load and the slot confirming something of it", d), func() (string, bool) {
		if time.Since(start) >= d && f.ConfirmedLSN() != from {
			return "", true
		}
		r.Running()
		return "slot confirmed nothing past " + from.String(), false
	})
}

func outageCount(t *testing.T, f *harness.Fixture) int {
	t.Helper()
	var n int
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+f.Table).Scan(&n), "count outbox rows")
	return n
}

// outagePGLogFrom remembers the end of the rig's PostgreSQL log, so that
// outageNoTimeoutInLog reads only what this test appended.
type outagePGLog struct {
	path   string
	offset int64
}

func outagePGLogFrom(t *testing.T) outagePGLog {
	t.Helper()
	path := rig.Env(t, "WALRELAY_TEST_PG_LOG")
	st, err := os.Stat(path)
	testkit.Must(t, err, "stat the PostgreSQL log")
	return outagePGLog{path: path, offset: st.Size()}
}

func outageNoTimeoutInLog(t *testing.T, l outagePGLog) {
	t.Helper()
	file, err := os.Open(l.path)
	testkit.Must(t, err, "open the PostgreSQL log")
	defer file.Close()
	_, err = file.Seek(l.offset, io.SeekStart)
	testkit.Must(t, err, "seek the PostgreSQL log")
	b, err := io.ReadAll(file)
	testkit.Must(t, err, "read the PostgreSQL log")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, outageTimeoutLog) {
			t.Errorf("PostgreSQL log: %s", line)
		}
	}
}

// outageLoad is the harness load run until stopped: 2 writers at about 150
// rows/s in all (transactions of 1 to 20 rows, 10.5 on average, every
// 140 ms per writer).
type outageLoad struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	n      int
	err    error
}

func outageStartLoad(f *harness.Fixture) *outageLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &outageLoad{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.n, l.err = f.Write(ctx, harness.Load{Writers: 2, Rows: 1 << 30, MaxTxRows: 20, AggregatesPerWriter: 10,
			Types: outageTypes, Pause: 140 * time.Millisecond})
	}()
	return l
}

// stop ends the load and returns the rows of its clean commits. A
// transaction cut short by the stop is rolled back or committed: the
// verifier reads the table, so either is fine.
func (l *outageLoad) stop() (int, error) {
	l.once.Do(func() {
		l.cancel()
		<-l.done
		if errors.Is(l.err, context.Canceled) {
			l.err = nil
		}
	})
	return l.n, l.err
}

// outageRigScript runs a rig script outside a test's control flow (in a
// cleanup, where a failure must not stop the other cleanups).
func outageRigScript(script string, args ...string) (string, error) {
	out, err := osexec.Command(filepath.Join(rig.RepoRoot(), "scripts", script), args...).CombinedOutput()
	return string(out), err
}

// TestPostgresRestartedUnderLoad restarts PostgreSQL (fast: a clean
// shutdown; immediate: a crash and recovery) under load, twice times the
// chaos scale. The same relay process reconnects by itself and catches up;
// writers retry through the restart. The slot may resume from an older
// position than the relay confirmed: after a crash, and with PostgreSQL 15
// after a clean shutdown too (a confirmed_flush_lsn change alone does not
// mark the slot dirty, so the shutdown checkpoint does not save it; 17
// does). So more is replayed: duplicates, never a loss.
func TestPostgresRestartedUnderLoad(t *testing.T) {
	exclusive(t)
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) { outagePostgres(t, mode) })
	}
}

// outageRestart is one PostgreSQL restart and how the relay came back.
type outageRestart struct {
	sessions  int // "replication started" lines in the relay's log before the restart
	mark      harness.Mark
	window    outageWindow
	done      time.Time     // the restart script returned: PostgreSQL accepts connections
	reconnect time.Duration // restart asked → a new session streams
	resume    pglogrepl.LSN // where the new session resumed (the slot's confirmed position then)
}

func outagePostgres(t *testing.T, mode string) {
	began := time.Now()
	f := harness.New(t, outageTypes...)
	r := f.Start()
	r.WaitStarted()
	db, err := pgxpool.New(context.Background(), f.PGURL)
	testkit.Must(t, err, "connect the writers' pool")
	t.Cleanup(db.Close)

	load := outageStartWriters(f, db, 2)
	defer load.stop()
	outageWaitProgress(t, f, r, 3*time.Second)
	var restarts []outageRestart
	for i := 0; i < 2*scale(t); i++ {
		restarts = append(restarts, outageRestartPG(t, f, r, db, mode))
		outageWaitProgress(t, f, r, 3*time.Second)
	}
	commits, failures, err := load.stop()
	testkit.Must(t, err, "write outbox rows")
	end := f.CurrentLSN()
	catchUp := f.WaitConfirmed(r, end, outageCatchUp)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0", code)
	}

	rows := f.OutboxRows()
	rep := f.Verify(rows)
	marks := make([]harness.Mark, len(restarts))
	for i, rs := range restarts {
		marks[i] = rs.mark
	}
	perFault, before := rep.ByFault(marks)
	t.Logf("pg restart %s: %d restarts; %d rows in the outbox, %d failed commits retried; %d messages delivered; lost %d, out of order %d, duplicates %d (%d before the first restart); caught up %s after the load stopped; test %s",
		mode, len(restarts), len(rows), failures, rep.Delivered, len(rep.Lost), len(rep.OutOfOrder), rep.Duplicates, before,
		catchUp.Round(time.Millisecond), time.Since(began).Round(time.Second))
	if before != 0 {
		t.Errorf("%d duplicates before the first restart; want 0", before)
	}
	total := 0
	started := outageSessions(t, r.Stderr.String())
	for i, rs := range restarts {
		// Every session that started after this restart (the relay's own
		// reconnect, and another when the restart also cost the leader its
		// lock) may publish again the rows committed after the position it
		// resumed from and before it started; nothing else.
		next := len(started)
		if i+1 < len(restarts) {
			next = restarts[i+1].sessions
		}
		bound := 0
		for _, s := range started[rs.sessions:next] {
			bound += outageReplayable(rows, commits, s.resume, s.at)
		}
		total += bound
		t.Logf("pg restart %s #%d: window at the restart: %d records in Kafka, %d rows committed, slot confirmed %s; relay streaming again %s after the restart was asked, resumed at %s (%d bytes before the confirmed position); %d sessions until the next restart; %d duplicates attributed (at most %d rows were replayable by those sessions)",
			mode, i+1, rs.window.records, rs.window.committed, rs.window.confirmed, rs.reconnect.Round(time.Millisecond), rs.resume, int64(rs.window.confirmed)-int64(rs.resume), next-rs.sessions, perFault[i], bound)
		if perFault[i] > bound {
			t.Errorf("restart #%d: %d duplicates; want at most %d, the rows committed after the positions its sessions resumed from", i+1, perFault[i], bound)
		}
	}
	harness.AssertClean(t, rep, total)
}

// outageRestartPG restarts PostgreSQL and waits for the relay to stream
// again in the same process.
func outageRestartPG(t *testing.T, f *harness.Fixture, r *harness.Relay, db *pgxpool.Pool, mode string) outageRestart {
	t.Helper()
	sessions := strings.Count(r.Stderr.String(), `"replication started"`)
	rs := outageRestart{sessions: sessions, mark: f.Mark()}
	rs.window = outageWindow{records: rs.mark.Records(), committed: outageCount(t, f), confirmed: f.ConfirmedLSN()}
	at := time.Now()
	rig.Script(t, "pg.sh", "restart", mode)
	rs.done = time.Now()
	// The fixture's pooled connections died with the server.
	f.DB.Reset()
	poll.Eventually(t, 2*time.Minute, "the relay streaming again after the "+mode+" restart", func() (string, bool) {
		out := r.Stderr.String()
		if strings.Count(out, `"replication started"`) > sessions {
			return "", true
		}
		r.Running()
		return "walrelay output:\n" + out, false
	})
	rs.reconnect = time.Since(at)
	rs.resume = outageLastResume(t, r.Stderr.String())
	return rs
}

// outageSession is one "replication started" line of the relay's log.
type outageSession struct {
	at     time.Time
	resume pglogrepl.LSN
}

// outageSessions reads every "replication started" line of the relay's log.
func outageSessions(t *testing.T, log string) []outageSession {
	t.Helper()
	var out []outageSession
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"replication started"`) {
			continue
		}
		var entry struct {
			Time string `json:"time"`
			LSN  string `json:"confirmed_flush_lsn"`
		}
		testkit.Must(t, json.Unmarshal([]byte(line), &entry), "parse %q", line)
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", entry.Time)
		testkit.Must(t, err, "time in %q", line)
		lsn, err := pglogrepl.ParseLSN(entry.LSN)
		testkit.Must(t, err, "confirmed_flush_lsn in %q", line)
		out = append(out, outageSession{at: at, resume: lsn})
	}
	return out
}

// outageLastResume is the confirmed_flush_lsn of the last "replication
// started" line of the relay's log.
func outageLastResume(t *testing.T, log string) pglogrepl.LSN {
	t.Helper()
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], `"replication started"`) {
			continue
		}
		var entry struct {
			LSN string `json:"confirmed_flush_lsn"`
		}
		testkit.Must(t, json.Unmarshal([]byte(lines[i]), &entry), "parse %q", lines[i])
		lsn, err := pglogrepl.ParseLSN(entry.LSN)
		testkit.Must(t, err, "confirmed_flush_lsn in %q", lines[i])
		return lsn
	}
	t.Fatalf("no \"replication started\" line in the relay's log")
	return 0
}

// outageReplayable counts the rows of the table that a session resuming at
// resume may publish again: those committed before the restart was over
// whose commit may lie after resume (the commit's end is at most the WAL
// position read right after it; an ambiguous commit has none).
func outageReplayable(rows []harness.Row, commits []outageCommit, resume pglogrepl.LSN, before time.Time) int {
	inTable := make(map[string]bool, len(rows))
	for _, r := range rows {
		inTable[r.ID] = true
	}
	n := 0
	for _, c := range commits {
		if !c.at.Before(before) || (c.lsn != 0 && c.lsn <= resume) {
			continue
		}
		for _, id := range c.ids {
			if inTable[id] {
				n++
			}
		}
	}
	return n
}

// outageCommit is one transaction a writer tried: lsn is the WAL position
// read after it committed, 0 when the commit failed (ambiguous).
type outageCommit struct {
	ids []string
	lsn pglogrepl.LSN
	at  time.Time
}

// outageWriters are writers that retry through a PostgreSQL restart. A
// failed transaction may have committed or not; after one, a writer
// re-reads its aggregates' versions from the table, so versions stay
// gap-free whatever happened.
type outageWriters struct {
	cancel context.CancelFunc
	g      sync.WaitGroup
	mu     sync.Mutex
	errs   []error
	all    []*outageWriter
}

func outageStartWriters(f *harness.Fixture, db *pgxpool.Pool, n int) *outageWriters {
	ctx, cancel := context.WithCancel(context.Background())
	ws := &outageWriters{cancel: cancel}
	for i := 0; i < n; i++ {
		w := &outageWriter{f: f, db: db, n: i, rng: rand.New(rand.NewPCG(uint64(i), 7)), versions: map[string]int64{}}
		ws.all = append(ws.all, w)
		ws.g.Add(1)
		go func() {
			defer ws.g.Done()
			if err := w.run(ctx); err != nil {
				ws.mu.Lock()
				ws.errs = append(ws.errs, err)
				ws.mu.Unlock()
			}
		}()
	}
	return ws
}

// stop ends the writers and returns every transaction they tried and the
// number that failed.
func (ws *outageWriters) stop() ([]outageCommit, int, error) {
	ws.cancel()
	ws.g.Wait()
	var commits []outageCommit
	failures := 0
	for _, w := range ws.all {
		commits = append(commits, w.commits...)
		failures += w.failures
	}
	return commits, failures, errors.Join(ws.errs...)
}

type outageWriter struct {
	f        *harness.Fixture
	db       *pgxpool.Pool
	n        int
	rng      *rand.Rand
	versions map[string]int64
	serial   int
	failures int
	commits  []outageCommit
}

// outageRow is one outbox row a writer inserts.
type outageRow struct {
	id, aggregateType, aggregateID string
	version                        int64
	payload                        string
	headers                        *string
}

var outageColumns = []string{"message_id", "aggregate_type", "aggregate_id", "aggregate_version", "type", "payload", "headers"}

// run commits transactions of 1 to 20 rows every 140 ms until ctx is done;
// it gives up only when PostgreSQL stays unusable for 2 minutes.
func (w *outageWriter) run(ctx context.Context) error {
	var failingSince time.Time
	for tx := 0; ctx.Err() == nil; tx++ {
		rows := w.batch(1 + w.rng.IntN(20))
		err := w.commit(ctx, tx%3, rows)
		c := outageCommit{ids: make([]string, len(rows)), at: time.Now()}
		for i, r := range rows {
			c.ids[i] = r.id
		}
		if err == nil {
			c.lsn = w.lsn(ctx)
			w.commits = append(w.commits, c)
			failingSince = time.Time{}
			time.Sleep(140 * time.Millisecond)
			continue
		}
		w.commits = append(w.commits, c) // ambiguous: maybe in the table
		if ctx.Err() != nil {
			return nil
		}
		w.failures++
		if failingSince.IsZero() {
			failingSince = time.Now()
		} else if time.Since(failingSince) > 2*time.Minute {
			return fmt.Errorf("writer %d: failing for 2 minutes: %w", w.n, err)
		}
		w.resync(ctx)
	}
	return nil
}

func (w *outageWriter) batch(size int) []outageRow {
	rows := make([]outageRow, size)
	for i := range rows {
		w.serial++
		k := w.rng.IntN(10)
		agg := fmt.Sprintf("pg-w%d-a%d", w.n, k)
		w.versions[agg]++
		rows[i] = outageRow{id: harness.NewUUID(), aggregateType: outageTypes[k%len(outageTypes)], aggregateID: agg,
			version: w.versions[agg], payload: fmt.Sprintf(`{"writer": %d, "serial": %d}`, w.n, w.serial)}
		if w.serial%2 == 0 {
			h := fmt.Sprintf(`{"traceparent": "00-%032x-%016x-01"}`, w.serial, w.n+1)
			rows[i].headers = &h
		}
	}
	return rows
}

// lsn is the WAL position right after a commit (at or past its end), 0
// when it cannot be read.
func (w *outageWriter) lsn(ctx context.Context) pglogrepl.LSN {
	var s string
	if err := w.db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0
	}
	return lsn
}

// resync waits until PostgreSQL answers and reloads the writer's versions
// from the table: the rows of an ambiguous commit are there or not.
func (w *outageWriter) resync(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		rows, err := w.db.Query(ctx, "SELECT aggregate_id, max(aggregate_version) FROM "+w.f.Table+" WHERE aggregate_id LIKE $1 GROUP BY aggregate_id",
			fmt.Sprintf("pg-w%d-%%", w.n))
		if err != nil {
			continue
		}
		versions := map[string]int64{}
		var agg string
		var v int64
		_, err = pgx.ForEachRow(rows, []any{&agg, &v}, func() error {
			versions[agg] = v
			return nil
		})
		if err == nil {
			w.versions = versions
			return
		}
	}
}

// commit writes one transaction row by row, as one multi-row INSERT, or
// with COPY.
func (w *outageWriter) commit(ctx context.Context, mode int, rows []outageRow) error {
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		switch mode {
		case 0:
			for _, r := range rows {
				if _, err := tx.Exec(ctx, "INSERT INTO "+w.f.Table+" ("+strings.Join(outageColumns, ", ")+") VALUES ($1, $2, $3, $4, 'order.submitted.v1', $5, $6)",
					r.id, r.aggregateType, r.aggregateID, r.version, r.payload, r.headers); err != nil {
					return err
				}
			}
			return nil
		case 1:
			var sb strings.Builder
			args := make([]any, 0, 6*len(rows))
			sb.WriteString("INSERT INTO " + w.f.Table + " (" + strings.Join(outageColumns, ", ") + ") VALUES ")
			for i, r := range rows {
				if i > 0 {
					sb.WriteString(", ")
				}
				fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d, 'order.submitted.v1', $%d, $%d)", 6*i+1, 6*i+2, 6*i+3, 6*i+4, 6*i+5, 6*i+6)
				args = append(args, r.id, r.aggregateType, r.aggregateID, r.version, r.payload, r.headers)
			}
			_, err := tx.Exec(ctx, sb.String(), args...)
			return err
		default:
			src := make([][]any, len(rows))
			for i, r := range rows {
				var headers any
				if r.headers != nil {
					headers = json.RawMessage(*r.headers)
				}
				src[i] = []any{r.id, r.aggregateType, r.aggregateID, r.version, "order.submitted.v1", json.RawMessage(r.payload), headers}
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{w.f.Table}, outageColumns, pgx.CopyFromRows(src))
			return err
		}
	})
}
